"""Evaluation metrics over sampled predictions: pass@k, maj@k and chain statistics.

Every function takes plain lists (per problem, its samples in sample order) and is checked in the tests
against a plain reference loop and hand-computed values.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from e2c.rewards.vote import answer_classes


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``c`` correct out of ``n`` samples (Chen et al., 2021):
    ``1 - C(n-c, k) / C(n, k)``, computed as a stable product.

    One right answer in 4 samples: a single draw finds it a quarter of the time, two draws half the time;
    with fewer wrong samples than draws, a right one is always among them.

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 2), pass_at_k(4, 3, 2), pass_at_k(8, 0, 4)
    (0.25, 0.5, 1.0, 0.0)
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_at_k_curve(counts: Sequence[tuple[int, int]], ks: Sequence[int] | None = None) -> dict[int, float]:
    """Mean unbiased pass@k over problems for each ``k`` (default 1..the fewest samples of a problem), from
    ``(samples, correct)`` per problem. pass@1 is then the paper's Pass@1 averaged over samples (avg@n).

    RL that sharpens the sampled distribution raises the curve's left end and leaves its right end flat;
    RL that adds solutions raises both (Yue et al., 2025).

    >>> pass_at_k_curve([(4, 1), (4, 0), (4, 4)])
    {1: 0.4166666666666667, 2: 0.5, 3: 0.5833333333333334, 4: 0.6666666666666666}
    """
    if not counts:
        return {}
    n_min = min(n for n, _ in counts)
    ks = list(range(1, n_min + 1)) if ks is None else [k for k in ks if 1 <= k <= n_min]
    return {k: sum(pass_at_k(n, c, k) for n, c in counts) / len(counts) for k in ks}


def default_ks(n: int) -> list[int]:
    """1, 2, 4, ... up to ``n``, and ``n`` itself."""
    ks = [k for k in (2**e for e in range(0, max(n, 1).bit_length())) if k <= n]
    return ks + ([n] if n not in ks else [])


def majority_correct(keys: Sequence[Hashable | None], corrects: Sequence[bool]) -> bool:
    """Whether the majority answer among ``keys`` (answer classes, see
    :func:`e2c.rewards.vote.answer_classes`) is correct; ties go to the answer seen first, and a problem
    with no votes counts as wrong."""
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return False
    best = max(counts.values())
    first = next(k for k in keys if k is not None and counts[k] == best)
    return any(c for k, c in zip(keys, corrects, strict=True) if k == first)


def maj_at_k(keys: Sequence[Hashable | None], corrects: Sequence[bool], k: int) -> bool:
    """maj@k of one problem: the majority vote over its first ``k`` samples."""
    return majority_correct(keys[:k], corrects[:k])


def _kind_of(samples: Sequence[Mapping[str, Any]]) -> str:
    return str(samples[0].get("kind", "math")) if samples else "math"


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def summarize(
    per_problem: Sequence[Sequence[Mapping[str, Any]]], ks: Sequence[int] | None = None
) -> dict[str, Any]:
    """Metrics of one dataset from its predictions, grouped per problem in sample order.

    Each prediction needs ``correct``, ``extracted``, ``chain_status``, ``finish_reason``, ``reason``,
    ``explore_tokens``, ``execute_tokens`` and ``forced_close``, and may carry ``kind`` (math, mcq,
    countdown, code; default math), which decides how wrong answers are grouped for maj@k (programs by their
    whitespace-folded text: grouping by behaviour needs runs on public tests, which test-time search does),
    and, for programs, ``tests_passed``, ``tests_total`` and ``sandbox_s`` (``tests_passed_rate``, the
    share of tests passed per sample, and the sandbox's seconds). pass@k and maj@k use the ``k`` that every
    problem has samples for.
    """
    flat = [p for probs in per_problem for p in probs]
    n_min = min((len(p) for p in per_problem), default=0)
    ks = [k for k in (ks or default_ks(n_min)) if 1 <= k <= n_min]
    out: dict[str, Any] = {
        "problems": len(per_problem),
        "samples": len(flat),
        "pass@1": _mean([_mean([float(s["correct"]) for s in p]) for p in per_problem if p]),
    }
    for k in ks:
        out[f"pass@{k}"] = _mean(
            [pass_at_k(len(p), sum(bool(s["correct"]) for s in p), k) for p in per_problem]
        )
    # Every answer, right or wrong, is grouped by the grader's equivalence before votes are counted.
    classes = [
        answer_classes([s["extracted"] for s in p], [bool(s["correct"]) for s in p], kind=_kind_of(p))
        for p in per_problem
    ]
    for k in ks:
        out[f"maj@{k}"] = _mean(
            [
                float(maj_at_k(c, [s["correct"] for s in p], k))
                for c, p in zip(classes, per_problem, strict=True)
            ]
        )
    out.update(
        format_rate=_mean([float(s["chain_status"] == "ok") for s in flat]),
        truncation_rate=_mean([float(s["finish_reason"] == "length") for s in flat]),
        no_answer_rate=_mean([float(s["reason"] == "no_answer") for s in flat]),
        forced_close_rate=_mean([float(bool(s["forced_close"])) for s in flat]),
        explore_tokens=_mean([s["explore_tokens"] for s in flat]),
        execute_tokens=_mean([s["execute_tokens"] for s in flat]),
    )
    out["total_tokens"] = out["explore_tokens"] + out["execute_tokens"]
    ran = [s for s in flat if s.get("tests_total")]
    if ran or any("tests_total" in s for s in flat):
        # Programs (code): all tests pass is `correct`; the share of tests passed is the second figure, over
        # every sample (one with no program, or whose tests did not run, passed none).
        out["tests_passed_rate"] = _mean(
            [s["tests_passed"] / s["tests_total"] if s.get("tests_total") else 0.0 for s in flat]
        )
        out["sandbox_s"] = round(sum(float(s.get("sandbox_s") or 0.0) for s in flat), 3)
        out["sandbox_error_rate"] = _mean([float(s["reason"] == "error") for s in flat])
    return out
