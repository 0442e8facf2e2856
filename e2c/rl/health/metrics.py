"""RL health per step: the ``health/*`` metrics the trainer computes from a step's sampled batch. Pure functions.

Accuracy on the step's samples, the reward's parts (``health/reward_correct``, ``_plan``, ``_overlong``; they
add up to verl's ``critic/score/mean``), the share of zero-variance groups, which part carries the
within-group variation (:func:`signal_shares`), truncation, skipped updates, the sampled tokens' entropy per
segment and, with code rows, the sandbox's figures (:func:`code_health`). The keys are the constants here.
More: docs/training.md, "RL health".
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

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
