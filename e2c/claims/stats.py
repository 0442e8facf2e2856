"""The statistics behind the claims' verdicts: pure functions over per-problem results.

- :func:`seed_problem_difference`: the paired difference of two arms run with the same seeds on the same
  problems, with a crossed bootstrap (seeds and problems resampled) and a t interval over the seed means.
- :func:`reach_ratio`: the paper's "fewer tokens for the same accuracy": the tokens per problem self-
  consistency spends for its best accuracy over those a method needs to reach it, bootstrapped over problems.
- :func:`verdict`: supported / not supported / not resolvable at this scale, from an interval.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from e2c.core.stats import Z95, wilson_interval

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
UNRESOLVED = "not resolvable at this scale"

# Two-sided 95% t quantiles by degrees of freedom, 1 to 30 (the seed-level interval has few of them).
T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
# A token ratio needs self-consistency to be right on at least this many problems, and defined in at least
# this share of the bootstrap resamples, before it can support or rule out anything.
MIN_REFERENCE_CORRECT = 10
MIN_DEFINED_SHARE = 0.975


def t95(df: int) -> float:
    """The two-sided 95% t quantile (the normal one beyond 30 degrees of freedom)."""
    if df < 1:
        return math.inf
    return T95[df - 1] if df <= len(T95) else Z95


def accuracy_ci(correct: Sequence[bool | float]) -> dict[str, Any]:
    """Accuracy of 0/1 results with its 95% Wilson interval: ``{"n", "correct", "accuracy", "ci"}``."""
    n = len(correct)
    k = round(sum(float(c) for c in correct))
    lo, hi = wilson_interval(k, n)
    return {"n": n, "correct": k, "accuracy": k / n if n else None, "ci": [lo, hi]}


def percentile(sorted_xs: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of sorted values, linear between order statistics."""
    if not sorted_xs:
        raise ValueError("percentile of no values")
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def seed_problem_difference(
    a: Mapping[int, Mapping[str, float]],
    b: Mapping[int, Mapping[str, float]],
    boot: int = 2000,
    rng_seed: int = 0,
) -> dict[str, Any]:
    """The paired difference ``a - b`` of two arms, each ``{seed: {problem id: score}}``.

    Only seeds both arms ran and problems both have in every such seed are used. Returns the mean
    difference over seeds and problems; its standard error over problems (of each problem's difference
    averaged over the seeds: the paired SE the paper's single-seed tables give) with the problems that rose
    and fell; per-seed differences; a 95% interval from a crossed bootstrap
    (seeds and problems resampled independently, ``boot`` times); a t interval over the per-seed means
    (seed-to-seed variation only, wide with few seeds); and ``ci``, the union of the two (the verdict's).
    """
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError("the two arms share no seed")
    ids = sorted(set.intersection(*(set(a[s]) & set(b[s]) for s in seeds)))
    if not ids:
        raise ValueError("the two arms share no problem")
    d = [[float(a[s][i]) - float(b[s][i]) for i in ids] for s in seeds]
    n_s, n_p = len(seeds), len(ids)
    per_seed = [sum(row) / n_p for row in d]
    mean = sum(per_seed) / n_s
    rng = random.Random(rng_seed)
    stats = []
    for _ in range(boot):
        ss = [rng.randrange(n_s) for _ in range(n_s)]
        ps = [rng.randrange(n_p) for _ in range(n_p)]
        stats.append(sum(d[s][p] for s in ss for p in ps) / (n_s * n_p))
    stats.sort()
    boot_ci = [percentile(stats, 0.025), percentile(stats, 0.975)]
    if n_s > 1:
        sd = math.sqrt(sum((x - mean) ** 2 for x in per_seed) / (n_s - 1))
        half = t95(n_s - 1) * sd / math.sqrt(n_s)
        seed_ci = [mean - half, mean + half]
    else:
        seed_ci = None
    ci = [min(boot_ci[0], seed_ci[0]), max(boot_ci[1], seed_ci[1])] if seed_ci else boot_ci
    # The bootstrap cannot see a difference it never observed (all pairs equal -> [0, 0]): no interval is
    # narrower than the rule of three allows, a discordance rate of up to 3 / problems either way.
    floor = resolution(n_p)
    # (scores are in [0, 1], so a difference is in [-1, 1])
    ci = [max(-1.0, min(ci[0], mean - floor)), min(1.0, max(ci[1], mean + floor))]
    # The paper's paired SE: of each problem's difference averaged over the seeds, over problems.
    by_problem = [sum(d[s][p] for s in range(n_s)) / n_s for p in range(n_p)]
    var = sum((x - mean) ** 2 for x in by_problem) / (n_p - 1) if n_p > 1 else 0.0
    return {
        "mean": mean,
        "se": math.sqrt(var / n_p),
        "rose": sum(1 for x in by_problem if x > 0),
        "fell": sum(1 for x in by_problem if x < 0),
        "seeds": seeds,
        "problems": n_p,
        "per_seed": dict(zip([str(s) for s in seeds], per_seed, strict=True)),
        "bootstrap_ci": boot_ci,
        "seed_t_ci": seed_ci,
        "ci": ci,
    }


def resolution(problems: int) -> float:
    """The rule of three: with no event in ``problems`` trials, its rate is below 3 / problems (95%)."""
    return 3.0 / problems if problems > 0 else math.inf


def problem_difference(
    a: Mapping[str, float], b: Mapping[str, float], boot: int = 2000, rng_seed: int = 0
) -> dict[str, Any]:
    """The paired difference ``a - b`` of two runs on the same problems (``{id: score}``), with a 95%
    bootstrap interval over problems: :func:`seed_problem_difference` with one seed."""
    res = seed_problem_difference({0: a}, {0: b}, boot, rng_seed)
    return {"mean": res["mean"], "problems": res["problems"], "ci": res["ci"]}


def verdict(ci: Sequence[float], delta: float) -> str:
    """The verdict on a claimed positive effect from the 95% interval of the measured effect.

    ``supported``: the interval is above 0. ``not supported``: it lies below ``delta`` (the smallest effect
    that would matter), so an effect of that size is ruled out, whether or not the sign is. Otherwise
    the interval holds both 0 and ``delta``: ``not resolvable at this scale``.
    """
    lo, hi = float(ci[0]), float(ci[1])
    if lo > 0:
        return SUPPORTED
    if hi < delta:
        return NOT_SUPPORTED
    return UNRESOLVED


# ------------------------------------------------------------------------------------------ tokens to reach
def curve(correct: Sequence[Sequence[float]], tokens: Sequence[Sequence[float]], idx: Sequence[int]) -> list:
    """``[(accuracy, mean tokens)]`` per budget over the problems ``idx`` (rows: budgets, columns: problems)."""
    n = len(idx)
    return [
        (sum(c[i] for i in idx) / n, sum(t[i] for i in idx) / n) for c, t in zip(correct, tokens, strict=True)
    ]


def tokens_to_reach(points: Sequence[tuple[float, float]], target: float, eps: float = 1e-9) -> float | None:
    """The fewest mean tokens among the budgets whose accuracy is at least ``target`` (None: none is)."""
    ok = [tok for acc, tok in points if acc >= target - eps]
    return min(ok) if ok else None


def ratio_at(ref: Sequence[tuple[float, float]], method: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """The reference's best accuracy, the tokens it spends there (its cheapest budget at that accuracy),
    the method's tokens to reach it, and their ratio (0.0 when the method never reaches it)."""
    target = max(acc for acc, _ in ref)
    ref_tokens = tokens_to_reach(ref, target)
    m_tokens = tokens_to_reach(method, target)
    ratio = 0.0 if m_tokens is None else (ref_tokens or 0.0) / max(m_tokens, 1e-9)
    if target <= 0:  # self-consistency never answers: there is no accuracy to reach, no ratio
        return {"target": target, "ref_tokens": ref_tokens, "method_tokens": m_tokens, "ratio": None}
    return {"target": target, "ref_tokens": ref_tokens, "method_tokens": m_tokens, "ratio": ratio}


def reach_ratio(
    ref_correct: Sequence[Sequence[float]],
    ref_tokens: Sequence[Sequence[float]],
    m_correct: Sequence[Sequence[float]],
    m_tokens: Sequence[Sequence[float]],
    boot: int = 2000,
    rng_seed: int = 0,
) -> dict[str, Any]:
    """Tokens per problem the reference (self-consistency) spends for its best accuracy over the budgets,
    divided by the tokens a method needs to reach that accuracy (>1: the method is cheaper; 0: it never
    reaches it), with a 95% bootstrap interval over problems (the target is recomputed in every resample).

    Each argument is a list over budgets of per-problem values, the problems in the same order everywhere.
    """
    n = len(ref_correct[0])
    if n == 0 or any(len(row) != n for row in (*ref_correct, *ref_tokens, *m_correct, *m_tokens)):
        raise ValueError("every budget needs a value for every problem, the same problems for both")
    full = list(range(n))
    point = ratio_at(curve(ref_correct, ref_tokens, full), curve(m_correct, m_tokens, full))
    if point["ratio"] is None:
        return {**point, "ci": None, "reached_share": None, "defined_share": 0.0, "problems": n}
    rng = random.Random(rng_seed)
    ratios = []
    for _ in range(boot):
        idx = [rng.randrange(n) for _ in range(n)]
        r = ratio_at(curve(ref_correct, ref_tokens, idx), curve(m_correct, m_tokens, idx))["ratio"]
        if r is not None:  # resamples where self-consistency never answers have no ratio
            ratios.append(r)
    ratios.sort()
    return {
        **point,
        "ci": [percentile(ratios, 0.025), percentile(ratios, 0.975)],
        "reached_share": sum(r > 0 for r in ratios) / len(ratios),
        "defined_share": len(ratios) / boot,
        "problems": n,
    }


def ratio_verdict(r: Mapping[str, Any] | None, delta: float) -> tuple[str, str | None]:
    """The verdict on "the method reaches self-consistency's best accuracy with fewer tokens" from
    :func:`reach_ratio`'s result, and why it is unresolved when it is for a reason other than the interval:
    a saving of at least ``delta`` (ratio above 1 + delta) must be inside the interval to be supported by it."""
    if r is None:
        return UNRESOLVED, "the method was not run"
    if r["ratio"] is None or r["ci"] is None:
        return UNRESOLVED, "self-consistency answers no problem"
    if r["target"] * r["problems"] < MIN_REFERENCE_CORRECT - 1e-9:
        return UNRESOLVED, f"self-consistency is right on fewer than {MIN_REFERENCE_CORRECT} problems"
    if r["defined_share"] < MIN_DEFINED_SHARE:
        return UNRESOLVED, f"the ratio is undefined in {100 * (1 - r['defined_share']):.0f}% of the resamples"
    return verdict([r["ci"][0] - 1.0, r["ci"][1] - 1.0], delta), None


def noninferior_verdict(gain: Sequence[float], versus_full: Sequence[float], delta: float) -> str:
    """The verdict on "exploration-only tuning adapts like full tuning": supported when EF-SFT beats
    nothing (``gain`` interval above 0) and is not worse than full SFT by ``delta`` or more (``versus_full``
    interval above -delta); not supported when its gain is ruled out (below ``delta``) or it is clearly
    worse than full SFT (interval below -delta); otherwise not resolvable."""
    if gain[0] > 0 and versus_full[0] > -delta:
        return SUPPORTED
    if gain[1] < delta or versus_full[1] < -delta:
        return NOT_SUPPORTED
    return UNRESOLVED
