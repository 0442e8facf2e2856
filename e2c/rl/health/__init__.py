"""RL health: did a run have anything to learn from, and did the weights move? Pure functions.

The trainer logs per step, into ``metrics.jsonl`` and every tracker, the ``health/*`` metrics computed here:
accuracy on the step's samples, the reward's parts (``health/reward_correct``, ``_plan``, ``_overlong``; they
add up to verl's ``critic/score/mean``), the share of zero-variance groups, which part carries the
within-group variation (:func:`signal_shares`), truncation, skipped updates, the sampled tokens' entropy per
segment and, with code rows, the sandbox's figures (:func:`code_health`). Weight movement comes from the CPU
rollout's ``rollout_sync.jsonl`` or from two HF folders. :func:`health_table` joins both files per step and
:func:`signal_verdict` says in one line whether the run had signal; ``python -m e2c.rl.health RUN_DIR
[--start-model DIR]`` prints them.
More: docs/training.md, "RL health".
"""

# The two halves, per step and per run, are imported from here by the trainer, the reports and the tests.
from e2c.rl.health.metrics import (
    CODE_ACC,
    CODE_TESTS,
    CORRECT_MALFORMED,
    ENTROPY,
    REWARD_CORRECT,
    REWARD_OTHER,
    REWARD_OVERLONG,
    REWARD_PLAN,
    REWARD_TOL,
    SANDBOX_ERRORS,
    SANDBOX_S,
    SANDBOX_S_MAX,
    SIGNAL_SHARE,
    STOPPED,
    TRAIN_ACC,
    TRUNCATED,
    UPDATE_SKIPPED,
    WELL_FORMED,
    ZERO_VAR,
    batch_health,
    code_health,
    group_of,
    reward_components,
    sampled_entropy,
    signal_shares,
    truncated_flags,
    zero_variance_group_share,
)
from e2c.rl.health.table import (
    BF16_CHANGED_AFTER,
    CODE_COLUMNS,
    FORMAT_COLLAPSE_RATIO,
    NO_MOVEMENT_BF16_SHARE,
    NO_MOVEMENT_REL_L2,
    NO_SIGNAL_ZERO_VAR_SHARE,
    REL_L2_AFTER,
    TABLE_COLUMNS,
    VERDICTS,
    VERL_FIELDS,
    WRONG_KIND_CORRECT_SHARE,
    format_table,
    format_warning,
    health_table,
    signal_verdict,
    stop_reason,
)

__all__ = [
    "BF16_CHANGED_AFTER",
    "CODE_ACC",
    "CODE_COLUMNS",
    "CODE_TESTS",
    "CORRECT_MALFORMED",
    "ENTROPY",
    "FORMAT_COLLAPSE_RATIO",
    "NO_MOVEMENT_BF16_SHARE",
    "NO_MOVEMENT_REL_L2",
    "NO_SIGNAL_ZERO_VAR_SHARE",
    "REL_L2_AFTER",
    "REWARD_CORRECT",
    "REWARD_OTHER",
    "REWARD_OVERLONG",
    "REWARD_PLAN",
    "REWARD_TOL",
    "SANDBOX_ERRORS",
    "SANDBOX_S",
    "SANDBOX_S_MAX",
    "SIGNAL_SHARE",
    "STOPPED",
    "TABLE_COLUMNS",
    "TRAIN_ACC",
    "TRUNCATED",
    "UPDATE_SKIPPED",
    "VERDICTS",
    "VERL_FIELDS",
    "WELL_FORMED",
    "WRONG_KIND_CORRECT_SHARE",
    "ZERO_VAR",
    "batch_health",
    "code_health",
    "format_table",
    "format_warning",
    "group_of",
    "health_table",
    "reward_components",
    "sampled_entropy",
    "signal_shares",
    "signal_verdict",
    "stop_reason",
    "truncated_flags",
    "zero_variance_group_share",
]
