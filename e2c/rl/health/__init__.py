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

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2c.core.files import read_records
from e2c.launch.checkpoints import step_metrics
from e2c.launch.weights import BF16_CHANGED, REL_L2, checkpoint_movement

if TYPE_CHECKING:
    from torch import Tensor

# Rewards closer than this are "equal": the rewards are float32 in verl (rm_scores), sums of a few terms.
REWARD_TOL = 1e-6

# Metric names (the report reads them).
TRAIN_ACC = "health/train_acc"
REWARD_CORRECT = "health/reward_correct"
REWARD_PLAN = "health/reward_plan"
REWARD_OVERLONG = "health/reward_overlong"
REWARD_OTHER = "health/reward_other"
ZERO_VAR = "health/zero_var_group_share"
SIGNAL_SHARE = "health/signal_share_"  # + correct | plan | overlong | other
TRUNCATED = "health/truncated_share"
# From the grader's per-response info: well-formed chains, and right answers in malformed chains (which a
# reward without a format gate pays for; see e2c.rewards.verl_score's require_format).
WELL_FORMED = "health/well_formed_share"
CORRECT_MALFORMED = "health/correct_malformed_share"
ENTROPY = "health/entropy_sampled"  # + "" | "_explore" | "_execute"
# Code rows (e2c.rewards.verl_score's code, tests_fraction, sandbox_s, sandbox_error per response).
SANDBOX_S = "e2c/sandbox_s"  # the step's sandbox seconds, summed over its samples
SANDBOX_S_MAX = "e2c/sandbox_s_max"
CODE_ACC = "health/code_acc"
CODE_TESTS = "health/code_tests_passed"
SANDBOX_ERRORS = "health/sandbox_errors"
# 1.0 on a step whose advantages were all zero: the trainer skipped its actor update (no AdamW step)
UPDATE_SKIPPED = "health/update_skipped"
# 1.0 on the step at which e2c.health_stop_after ended the run early (stop_reason)
STOPPED = "health/stopped"
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


# --- per step, from the sampled batch --------------------------------------------------------------------
def group_of(key: str) -> str:
    """The GRPO group (prompt uid) of a transfer-queue key: verl's agent loop stores each sample under
    ``{uid}_{session}_{output_index}``.

    >>> group_of("0b1c-77_3_0")
    '0b1c-77'
    >>> group_of("plain")
    'plain'
    """
    parts = str(key).rsplit("_", 2)
    return parts[0] if len(parts) == 3 else str(key)


def _groups(values: Sequence[float], groups: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    if len(values) != len(groups):
        raise ValueError(f"{len(values)} values but {len(groups)} group ids")
    out: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        out[g].append(i)
    return out


def zero_variance_group_share(
    rewards: Sequence[float], groups: Sequence[Hashable], tol: float = REWARD_TOL
) -> float | None:
    """Share of groups whose rewards are all equal (max - min <= ``tol``), i.e. whose GRPO advantages are all
    zero; a group of one counts as equal (there is nothing to compare it with). None without rows.

    >>> zero_variance_group_share([1, 1, 0, 1, 0.5, 0.5], ["a", "a", "b", "b", "c", "c"])
    0.6666666666666666
    """
    by_group = _groups(rewards, groups)
    if not by_group:
        return None
    flat = 0
    for idx in by_group.values():
        vals = [float(rewards[i]) for i in idx]
        flat += max(vals) - min(vals) <= tol
    return flat / len(by_group)


def reward_components(
    scores: Sequence[float],
    acc: Sequence[float],
    plan: Sequence[float | None] | None = None,
    overlong: Sequence[float | None] | None = None,
    correct: Sequence[float | None] | None = None,
) -> dict[str, list[float]]:
    """Split each response's reward into ``correct``, ``plan``, ``overlong`` and ``other``.

    ``correct`` is the reward's correctness term, the reward manager's ``correct_reward`` (None or missing:
    ``acc``; they differ for code rows under ``code_reward=fraction``, whose term is the share of tests
    passed). ``plan`` and ``overlong`` are its explicit ``plan_reward`` / ``overlong_reward`` (None or
    missing: plan is inferred as ``score - correct - overlong``, overlong as 0). ``other`` is what is left,
    ``score - correct - plan - overlong``: 0 with the project's grader, non-zero only when a custom reward
    function scores something else. The four add up to ``scores`` exactly (per response).

    >>> c = reward_components([1.0, 0.75, -0.5], [1, 1, 0], [0.0, -0.25, 0.0], [0.0, 0.0, -0.5])
    >>> c["correct"], c["plan"], c["overlong"], c["other"]
    ([1.0, 1.0, 0.0], [0.0, -0.25, 0.0], [0.0, 0.0, -0.5], [0.0, 0.0, 0.0])
    """
    n = len(scores)
    if (
        len(acc) != n
        or (plan is not None and len(plan) != n)
        or (overlong is not None and len(overlong) != n)
        or (correct is not None and len(correct) != n)
    ):
        raise ValueError("scores, acc, plan, overlong and correct need one value per response")
    out: dict[str, list[float]] = {"correct": [], "plan": [], "overlong": [], "other": []}
    for i in range(n):
        c = correct[i] if correct is not None else None
        s, a = float(scores[i]), float(acc[i]) if c is None else float(c)
        o = overlong[i] if overlong is not None else None
        o = 0.0 if o is None else float(o)
        p = plan[i] if plan is not None else None
        p = s - a - o if p is None else float(p)
        out["correct"].append(a)
        out["plan"].append(p)
        out["overlong"].append(o)
        out["other"].append(s - a - p - o)
    return out


def signal_shares(
    components: Mapping[str, Sequence[float]], groups: Sequence[Hashable], tol: float = REWARD_TOL
) -> dict[str, float]:
    """Which reward component the GRPO advantages come from.

    In a group the reward's deviation from the group mean (the GRPO advantage before dividing by the
    group's std) is the sum of the components' deviations. The share of component ``k`` in a group is
    ``sum_i dc_ki * dr_i / sum_i dr_i**2`` (its covariance with the reward over the reward's variance); the
    shares of one group add up to 1 and a component can be negative (it works against the others). The
    result is the mean over the groups whose reward varies (more than ``tol``), each group weighing the same,
    as GRPO's per-group std normalisation makes them. Empty when no group varies.

    >>> signal_shares({"correct": [1, 0, 1, 1], "overlong": [0, 0, -0.5, 0]}, ["a", "a", "b", "b"])
    {'correct': 0.5, 'overlong': 0.5}
    """
    names = list(components)
    if not names:
        return {}
    total = [sum(float(components[k][i]) for k in names) for i in range(len(groups))]
    by_group = _groups(total, groups)
    sums = dict.fromkeys(names, 0.0)
    varying = 0
    for idx in by_group.values():
        r_mean = sum(total[i] for i in idx) / len(idx)
        dr = [total[i] - r_mean for i in idx]
        var = sum(d * d for d in dr)
        if max(total[i] for i in idx) - min(total[i] for i in idx) <= tol or var <= 0:
            continue
        varying += 1
        for k in names:
            vals = [float(components[k][i]) for i in idx]
            c_mean = sum(vals) / len(vals)
            sums[k] += sum((v - c_mean) * d for v, d in zip(vals, dr)) / var
    return {k: v / varying for k, v in sums.items()} if varying else {}


def truncated_flags(
    lengths: Sequence[int], last_tokens: Sequence[int | None], stop_ids: Sequence[int] | frozenset[int]
) -> list[bool]:
    """True for a response that did not end on a stop token (EOS, the chain's one-token closing tag): the
    rollout cut it at a length limit (the response budget, a row's own budget, the context window). An empty
    response (aborted) is not counted as truncated.

    >>> truncated_flags([3, 4, 0], [2, 5, None], {2})
    [False, True, False]
    """
    stops = {int(s) for s in stop_ids}
    return [int(n) > 0 and (t is None or int(t) not in stops) for n, t in zip(lengths, last_tokens)]


def sampled_entropy(log_probs: Tensor, mask: Tensor) -> float | None:
    """``-mean(log p)`` of the sampled tokens over ``mask`` (B x T each): an unbiased estimate of the mean
    per-token entropy of the distribution the tokens were drawn from (temperature-scaled; with top-p/top-k
    it is the entropy of the untruncated distribution, biased low). None for an empty mask.

    >>> import torch
    >>> sampled_entropy(torch.tensor([[-1.0, -3.0, -9.0]]), torch.tensor([[1, 1, 0]]))
    2.0
    """
    m = mask.to(log_probs.dtype) if mask.dtype != log_probs.dtype else mask
    count = float(m.sum())
    if count <= 0:
        return None
    return float(-(log_probs * m).sum() / count)


def batch_health(
    groups: Sequence[Hashable],
    scores: Sequence[float],
    reward_infos: Sequence[Mapping[str, Any] | None],
    lengths: Sequence[int],
    last_tokens: Sequence[int | None] | None = None,
    stop_ids: Sequence[int] | frozenset[int] = (),
) -> dict[str, float]:
    """The step's ``health/*`` metrics from its sampled responses (one entry per response, padding already
    removed): group ids, rewards (verl's ``rm_scores`` summed), the reward manager's ``reward_extra_info``
    dicts, response lengths and last tokens. Responses of length 0 (aborted) are left out, as verl's
    ``critic/score/mean`` leaves them out. A metric whose inputs are missing is left out, never guessed:
    accuracy and components need ``acc`` in every row's info, truncation needs ``stop_ids``.
    """
    keep = [i for i in range(len(scores)) if int(lengths[i]) > 0]
    if not keep:
        return {}
    g = [groups[i] for i in keep]
    s = [float(scores[i]) for i in keep]
    infos = [dict(reward_infos[i] or {}) for i in keep]
    out: dict[str, float] = {}
    share = zero_variance_group_share(s, g)
    if share is not None:
        out[ZERO_VAR] = share
    if last_tokens is not None and stop_ids:
        flags = truncated_flags([lengths[i] for i in keep], [last_tokens[i] for i in keep], stop_ids)
        out[TRUNCATED] = sum(flags) / len(flags)
    for key, name in ((WELL_FORMED, "well_formed"), (CORRECT_MALFORMED, "correct_malformed")):
        vals = [_number(info.get(name)) for info in infos]
        if vals and all(v is not None for v in vals):
            out[key] = sum(vals) / len(vals)  # type: ignore[arg-type]
    if all(_number(info.get("acc")) is not None for info in infos):
        acc = [float(info["acc"]) for info in infos]
        comps = reward_components(
            s,
            acc,
            [_number(info.get("plan_reward")) for info in infos],
            [_number(info.get("overlong_reward")) for info in infos],
            [_number(info.get("correct_reward")) for info in infos],
        )
        n = len(s)
        # A sample the sandbox failed on says nothing about the policy's answers.
        judged = [a for a, info in zip(acc, infos) if not _number(info.get("sandbox_error"))]
        if judged:
            out[TRAIN_ACC] = sum(judged) / len(judged)
        out[REWARD_CORRECT] = sum(comps["correct"]) / n
        out[REWARD_PLAN] = sum(comps["plan"]) / n
        out[REWARD_OVERLONG] = sum(comps["overlong"]) / n
        if max(abs(v) for v in comps["other"]) > REWARD_TOL:
            out[REWARD_OTHER] = sum(comps["other"]) / n
        else:
            comps.pop("other")
        for k, v in signal_shares(comps, g).items():
            out[SIGNAL_SHARE + k] = v
    out.update(code_health(infos))
    return out


def code_health(infos: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The step's code metrics from its responses' reward infos (:mod:`e2c.rewards.verl_score`'s ``code``,
    ``acc``, ``tests_fraction``, ``sandbox_s``, ``sandbox_error``); empty on a step without code rows. The
    accuracies leave out the samples the sandbox failed on (an error, not a wrong answer), which
    :data:`SANDBOX_ERRORS` counts; they are absent when every code sample failed.

    >>> out = code_health([{"code": 1, "acc": 1, "tests_fraction": 1, "sandbox_s": 0.5},
    ...                    {"code": 1, "acc": 0, "tests_fraction": 0.5, "sandbox_s": 2.0},
    ...                    {"code": 1, "acc": 0, "sandbox_error": 1, "sandbox_s": 0.25}, {"acc": 1}])
    >>> out["e2c/sandbox_s"], out["e2c/sandbox_s_max"], out["health/code_acc"], out["health/code_tests_passed"]
    (2.75, 2.0, 0.5, 0.75)
    >>> out["health/sandbox_errors"], code_health([{"acc": 1, "code": 0}])
    (1.0, {})
    """
    rows = [info for info in infos if _number(info.get("code"))]
    if not rows:
        return {}
    seconds = [_number(info.get("sandbox_s")) or 0.0 for info in rows]
    failed = [bool(_number(info.get("sandbox_error"))) for info in rows]
    out = {SANDBOX_S: sum(seconds), SANDBOX_S_MAX: max(seconds), SANDBOX_ERRORS: float(sum(failed))}
    judged = [info for info, bad in zip(rows, failed) if not bad]
    for key, name in ((CODE_ACC, "acc"), (CODE_TESTS, "tests_fraction")):
        vals = [v for info in judged if (v := _number(info.get(name))) is not None]
        if vals and len(vals) == len(judged):
            out[key] = sum(vals) / len(vals)
    return out


def _number(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


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
