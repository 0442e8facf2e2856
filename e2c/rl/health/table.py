"""RL health per run: :func:`health_table` joins ``metrics.jsonl`` with the weight movement (the CPU
rollout's ``rollout_sync.jsonl``, or two HF folders) per step; :func:`signal_verdict` says in one line whether
the run had signal, :func:`format_warning` and :func:`stop_reason` flag collapse, :func:`format_table` prints it.
More: docs/training.md, "RL health".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.core.files import read_records
from e2c.launch.checkpoints import step_metrics
from e2c.launch.weights import BF16_CHANGED, REL_L2, checkpoint_movement
from e2c.rl.health.metrics import (
    CODE_ACC,
    CODE_TESTS,
    CORRECT_MALFORMED,
    ENTROPY,
    REWARD_CORRECT,
    REWARD_OVERLONG,
    REWARD_PLAN,
    SANDBOX_ERRORS,
    SANDBOX_S,
    SANDBOX_S_MAX,
    SIGNAL_SHARE,
    TRAIN_ACC,
    TRUNCATED,
    UPDATE_SKIPPED,
    WELL_FORMED,
    ZERO_VAR,
    _number,
)

# health_table's movement columns: the weights after step t's update (pushed to the rollout at the end of
# step t, before step t+1's generation), against the start.
REL_L2_AFTER = "weight_rel_l2_after_step"
BF16_CHANGED_AFTER = "weight_bf16_changed_share_after_step"

# verl's per-step fields kept in health_table's rows (with every health/* and e2c/* field).
VERL_FIELDS = (
    "critic/score/mean",
    "critic/rewards/mean",
    "actor/pg_clipfrac",
    "actor/pg_clipfrac_lower",
    "actor/ppo_kl",
    "actor/entropy",
    "actor/grad_norm",
    "actor/pg_loss",
    "response_length/mean",
    "response_length/max",
    "response_length/clip_ratio",
    "response/aborted_ratio",
    "timing_s/step",
)

# --- verdict thresholds --------------------------------------------------------------------------------
# GRPO gives a zero-variance group zero advantage. When nine groups in ten carry none, a small CPU batch
# (4-8 prompts) trains on less than one group per step: the gradient is noise around the KL/entropy terms.
NO_SIGNAL_ZERO_VAR_SHARE = 0.9
# A weight whose move is a fraction f (< 1) of its bf16 spacing flips its bf16 rounding with probability
# about f, so this share is about the mean move in bf16 steps. Below a tenth of a step a bf16 copy of the
# policy (what vLLM serves, what inference loads) is almost the start model: "moved by less than one bf16 step".
NO_MOVEMENT_BF16_SHARE = 0.1
# Used when only the relative L2 is known: bf16 rounds a weight with a relative error up to 2**-9 (about
# 1e-3 in RMS over a tensor); a total move below that is smaller than the rounding of a bf16 checkpoint.
NO_MOVEMENT_REL_L2 = 1e-3
# The GRPO advantage of a group is its rewards' deviation from the group mean; when correctness carries
# less than half of that deviation (averaged over groups with any), the policy is mostly pushed by the
# overlong/plan terms, not by getting answers right.
WRONG_KIND_CORRECT_SHARE = 0.5

VERDICTS = ("no signal", "no movement", "signal of the wrong kind", "had signal")


# --- per run ---------------------------------------------------------------------------------------------
def _kept(key: str) -> bool:
    return key.startswith(("health/", "e2c/")) or key in VERL_FIELDS


def health_table(run_dir: str | Path, start_model_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """One row per training step of an RL run folder: the step's ``health/*``, ``e2c/*`` and
    :data:`VERL_FIELDS` metrics from ``metrics.jsonl`` (after ``metrics_history.jsonl``, the earlier launches
    of a resumed run; a field logged again for a step keeps its last value), and the weight movement.

    Movement convention: row ``t``'s :data:`REL_L2_AFTER` / :data:`BF16_CHANGED_AFTER` describe the weights
    **after step t's update** against the start: verl pushes them to the rollout at the end of step ``t``
    (``rollout_sync.jsonl`` record with ``global_steps == t``), so they are the weights that generate step
    ``t + 1``; step ``t``'s own samples came from row ``t - 1``'s weights. ``weight_start_step`` is the step
    of the weights compared against (0, or the step a resumed launch started from: the rollout keeps the
    first weights of its own process). Of several records for one step the one with the earliest start wins.
    ``weight_source`` says where the numbers came from: ``rollout_sync`` or, with ``start_model_dir`` and no
    sync record (a GPU run), ``checkpoint`` (:func:`checkpoint_movement` of
    ``global_step_t/actor/huggingface``; slow: reads both models).
    """
    run_dir = Path(run_dir)
    steps: dict[int, dict[str, Any]] = {}
    for step, data in step_metrics(run_dir).items():
        kept = {k: v for k, v in data.items() if _kept(k)}
        if kept:
            steps[step] = kept

    moved: dict[int, dict[str, Any]] = {}
    for _, rec in read_records(run_dir / "rollout_sync.jsonl", strict=False):
        step, rel = rec.get("global_steps"), rec.get(REL_L2)
        if not isinstance(step, int) or rel is None:
            continue
        start = rec.get("start_global_steps", 0)
        start = start if isinstance(start, int) else 0
        old = moved.get(step)
        if old is None or start <= old["weight_start_step"]:
            moved[step] = {
                REL_L2_AFTER: rel,
                BF16_CHANGED_AFTER: rec.get(BF16_CHANGED),
                "weight_start_step": start,
                "weight_source": "rollout_sync",
            }

    rows = []
    for step in sorted(steps):
        row: dict[str, Any] = {"step": step, **steps[step]}
        if step in moved:
            row.update(moved[step])
        elif start_model_dir is not None:
            hf = run_dir / f"global_step_{step}" / "actor" / "huggingface"
            if hf.is_dir():
                m = checkpoint_movement(start_model_dir, hf)
                row.update(
                    {
                        REL_L2_AFTER: m[REL_L2],
                        BF16_CHANGED_AFTER: m[BF16_CHANGED],
                        "weight_start_step": 0,
                        "weight_source": "checkpoint",
                    }
                )
        rows.append(row)
    return rows


def _mean(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    vals = [v for r in rows if (v := _number(r.get(key))) is not None]
    return sum(vals) / len(vals) if vals else None


def _last(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    for r in reversed(rows):
        if (v := _number(r.get(key))) is not None:
            return v
    return None


def signal_verdict(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line: ``"<verdict>: <why>; <numbers>"``, the verdict one of :data:`VERDICTS`, checked in order:

    1. ``no signal``: on average at least :data:`NO_SIGNAL_ZERO_VAR_SHARE` of the groups had equal rewards,
       or (without that metric) no sampled response was ever correct, or every one was;
    2. ``no movement``: after the last step the weights moved less than about one bf16 step
       (:data:`NO_MOVEMENT_BF16_SHARE`, else :data:`NO_MOVEMENT_REL_L2`);
    3. ``signal of the wrong kind``: correctness carried less than :data:`WRONG_KIND_CORRECT_SHARE` of the
       within-group reward variation (``health/signal_share_correct``), e.g. the groups varied only through
       the overlong penalty or the plan term, or no response was ever correct while rewards still varied;
    4. ``had signal``.

    Means are over the rows that have the metric; movement is the last row's. A metric a run did not log
    is not used (the line says "n/a"). No row at all: ``no signal`` (nothing was logged).

    >>> signal_verdict([{"step": 1, "health/zero_var_group_share": 1.0, "health/train_acc": 0.0}])[:10]
    'no signal:'
    """
    if not rows:
        return "no signal: no RL step with metrics was logged"
    zero_var = _mean(rows, ZERO_VAR)
    acc_mean = _mean(rows, TRAIN_ACC)
    accs = [v for r in rows if (v := _number(r.get(TRAIN_ACC))) is not None]
    acc_max, acc_min = (max(accs), min(accs)) if accs else (None, None)
    correct_share = _mean(rows, SIGNAL_SHARE + "correct")
    bf16 = _last(rows, BF16_CHANGED_AFTER)
    rel = _last(rows, REL_L2_AFTER)

    def fmt(x: float | None, spec: str) -> str:
        return "n/a" if x is None else format(x, spec)

    skipped = sum(1 for r in rows if (_number(r.get(UPDATE_SKIPPED)) or 0.0) > 0)
    numbers = (
        f"{len(rows)} steps ({skipped} with nothing to learn, update skipped); zero-variance groups {fmt(zero_var, '.0%')}, train acc {fmt(acc_mean, '.3f')} "
        f"(min {fmt(acc_min, '.3f')}, max {fmt(acc_max, '.3f')}), correctness share of the advantage "
        f"{fmt(correct_share, '.0%')}, weights after the last step: rel L2 {fmt(rel, '.2e')}, "
        f"bf16 values changed {fmt(bf16, '.2%')}"
    )
    saturated = acc_max is not None and (acc_max <= 0 or acc_min >= 1)
    if zero_var is not None and zero_var >= NO_SIGNAL_ZERO_VAR_SHARE:
        return f"no signal: {zero_var:.0%} of the groups had equal rewards (zero advantage); {numbers}"
    if zero_var is None and saturated:
        return f"no signal: every sampled answer was {'wrong' if acc_max <= 0 else 'right'}; {numbers}"
    if bf16 is not None and bf16 < NO_MOVEMENT_BF16_SHARE:
        return (
            f"no movement: only {bf16:.2%} of the weights changed their bf16 value since the start; {numbers}"
        )
    if bf16 is None and rel is not None and rel < NO_MOVEMENT_REL_L2:
        return f"no movement: the weights moved {rel:.2e} of their norm, below bf16 rounding; {numbers}"
    if saturated:
        return (
            f"signal of the wrong kind: every sampled answer was {'wrong' if acc_max <= 0 else 'right'}, the "
            f"rewards varied only through the other terms; {numbers}"
        )
    if correct_share is not None and correct_share < WRONG_KIND_CORRECT_SHARE:
        return (
            f"signal of the wrong kind: correctness carried {correct_share:.0%} of the within-group reward "
            f"variation (plan {fmt(_mean(rows, SIGNAL_SHARE + 'plan'), '.0%')}, overlong "
            f"{fmt(_mean(rows, SIGNAL_SHARE + 'overlong'), '.0%')}); {numbers}"
        )
    return f"had signal: {numbers}"


# A run whose share of well-formed chains falls to half of its first step's is losing the chain format,
# whatever its reward says (the quickstart's GRPO without a format gate: 0.38 -> 0.00 in six steps).
FORMAT_COLLAPSE_RATIO = 0.5


def format_warning(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """A warning when the share of well-formed sampled chains (``health/well_formed_share``, else
    ``e2c/well_formed_share``) fell below :data:`FORMAT_COLLAPSE_RATIO` of its first logged value; None
    otherwise.

    >>> format_warning([{"e2c/well_formed_share": 0.38}, {"e2c/well_formed_share": 0.0}])
    'well-formed chains fell from 0.38 at the first step to 0.00 at the last: the policy is losing the chain format'
    """
    for key in (WELL_FORMED, "e2c/well_formed_share"):
        vals = [v for r in rows if (v := _number(r.get(key))) is not None]
        if len(vals) >= 2:
            if vals[0] > 0 and vals[-1] < FORMAT_COLLAPSE_RATIO * vals[0]:
                return (
                    f"well-formed chains fell from {vals[0]:.2f} at the first step to {vals[-1]:.2f} at the "
                    "last: the policy is losing the chain format"
                )
            return None
    return None


def stop_reason(rows: Sequence[Mapping[str, Any]], window: int) -> str | None:
    """Why a run should stop now (one clause), or None; ``rows`` are its steps so far in order, each with
    the step's ``health/*`` metrics. Checked only from ``window`` steps on (``window`` 0: never):

    - **no signal**: each of the last ``window`` steps had its update skipped (every advantage zero) or at
      least :data:`NO_SIGNAL_ZERO_VAR_SHARE` of its groups with equal rewards;
    - **format collapsing**: with at least ``2 * window`` steps, the mean sampled well-formed share of the
      last ``window`` steps is below :data:`FORMAT_COLLAPSE_RATIO` of the first ``window`` steps' (the
      quickstart's GRPO without a format gate went 0.38 -> 0.00 in six steps).

    >>> stop_reason([{"health/update_skipped": 1.0}] * 3, 3)[:9]
    'no signal'
    >>> stop_reason([{"health/well_formed_share": v} for v in (0.6, 0.6, 0.2, 0.2)], 2)[:17]
    'format collapsing'
    >>> stop_reason([{"health/zero_var_group_share": 0.5}] * 3, 3) is None
    True
    """
    if window <= 0 or len(rows) < window:
        return None
    last = rows[-window:]
    if all(
        (_number(r.get(UPDATE_SKIPPED)) or 0.0) > 0
        or (_number(r.get(ZERO_VAR)) or 0.0) >= NO_SIGNAL_ZERO_VAR_SHARE
        for r in last
    ):
        return (
            f"no signal: each of the last {window} steps had every advantage zero or at least "
            f"{NO_SIGNAL_ZERO_VAR_SHARE:.0%} of its groups with equal rewards"
        )
    wf = [v for r in rows if (v := _number(r.get(WELL_FORMED))) is not None]
    if len(wf) >= 2 * window:
        first, recent = sum(wf[:window]) / window, sum(wf[-window:]) / window
        if first > 0 and recent < FORMAT_COLLAPSE_RATIO * first:
            return (
                f"format collapsing: the sampled chains' well-formed share fell from {first:.2f} (first "
                f"{window} steps) to {recent:.2f} (last {window})"
            )
    return None


TABLE_COLUMNS = (
    ("step", "d"),
    ("critic/score/mean", ".3f"),
    (TRAIN_ACC, ".3f"),
    (REWARD_CORRECT, ".3f"),
    (REWARD_PLAN, ".3f"),
    (REWARD_OVERLONG, ".3f"),
    (ZERO_VAR, ".2f"),
    (UPDATE_SKIPPED, ".0f"),
    (SIGNAL_SHARE + "correct", ".2f"),
    (TRUNCATED, ".2f"),
    (WELL_FORMED, ".2f"),
    (CORRECT_MALFORMED, ".2f"),
    ("response_length/mean", ".1f"),
    (ENTROPY, ".3f"),
    ("actor/pg_clipfrac", ".3f"),
    ("e2c/adv_abs_before", ".3f"),
    ("e2c/adv_abs_after", ".3f"),
    (REL_L2_AFTER, ".2e"),
    (BF16_CHANGED_AFTER, ".3f"),
)


# Shown only for runs that logged them (a run with code rows).
CODE_COLUMNS = (
    (CODE_ACC, ".3f"),
    (CODE_TESTS, ".3f"),
    (SANDBOX_ERRORS, ".0f"),
    (SANDBOX_S, ".1f"),
    (SANDBOX_S_MAX, ".1f"),
)


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The main columns of :func:`health_table` as a tab-separated table ("-" where a step lacks one), with
    :data:`CODE_COLUMNS` when any step has one of them."""
    columns = TABLE_COLUMNS
    if any(name in r for r in rows for name, _ in CODE_COLUMNS):
        columns = (*TABLE_COLUMNS, *CODE_COLUMNS)
    lines = ["\t".join(name for name, _ in columns)]
    for r in rows:
        cells = []
        for name, spec in columns:
            v = _number(r.get(name))
            cells.append("-" if v is None else format(int(v) if spec == "d" else v, spec))
        lines.append("\t".join(cells))
    return "\n".join(lines)
