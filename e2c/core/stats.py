"""Statistics of evaluation results: Wilson score intervals and paired differences of per-problem scores."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (``successes`` of ``n``); ``(0.0, 1.0)`` for n = 0.

    Unlike the normal (Wald) interval it stays inside [0, 1] and is not degenerate at 0 or n successes,
    which matters for the small accuracies of a 135M model.
    """
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} not in [0, {n}]")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    lo = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the ends (no rounding residue)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def paired_difference(after: Sequence[float], before: Sequence[float]) -> dict[str, Any]:
    """Mean of the per-problem differences ``after - before`` and its standard error.

    The two lists are scores of the same problems in the same order (1.0 correct, 0.0 wrong). The standard
    error is that of the mean of the differences, ``sd(d) / sqrt(n)`` with the sample standard deviation
    (n - 1), which accounts for the correlation between the two runs on the same problems. ``exceeds_2se``
    says whether the mean difference is more than twice its standard error (a positive improvement only).
    """
    if len(after) != len(before):
        raise ValueError(f"paired lists differ in length: {len(after)} and {len(before)}")
    n = len(after)
    if n == 0:
        return {"n": 0, "mean": None, "se": None, "exceeds_2se": False}
    d = [float(a) - float(b) for a, b in zip(after, before, strict=True)]
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    se = math.sqrt(var / n)
    return {
        "n": n,
        "mean": mean,
        "se": se,
        "z": (mean / se) if se > 0 else None,
        "exceeds_2se": bool(mean > 2 * se and mean > 0),
        "improved": sum(1 for x in d if x > 0),
        "worsened": sum(1 for x in d if x < 0),
    }


def align_scores(
    after: Mapping[str, float], before: Mapping[str, float]
) -> tuple[list[float], list[float], list[str]]:
    """The scores of the problems present in both runs, in the order of ``before``: (after, before, ids)."""
    ids = [k for k in before if k in after]
    return [after[k] for k in ids], [before[k] for k in ids], ids


def mean_interval(scores: Sequence[float], z: float = Z95) -> dict[str, Any]:
    """Mean of per-problem scores (e.g. each problem's share of right samples: avg@k) with its standard
    error over problems and a normal 95% interval clipped to [0, 1]. With one sample per problem and a
    binomial score the Wilson interval (:func:`wilson_interval`) is better; with several samples the
    per-problem mean is not binomial, and the problems are the unit that varies.

    >>> r = mean_interval([1.0, 0.5, 0.0, 0.5])
    >>> r["mean"], round(r["se"], 4), [round(x, 4) for x in r["ci95"]]
    (0.5, 0.2041, [0.0999, 0.9001])
    """
    n = len(scores)
    if n == 0:
        return {"n": 0, "mean": None, "se": None, "ci95": [0.0, 1.0]}
    mean = sum(scores) / n
    var = sum((x - mean) ** 2 for x in scores) / (n - 1) if n > 1 else 0.0
    se = math.sqrt(var / n)
    return {"n": n, "mean": mean, "se": se, "ci95": [max(0.0, mean - z * se), min(1.0, mean + z * se)]}
