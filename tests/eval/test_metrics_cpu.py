"""pass@k, maj@k and the per-dataset summary against hand-computed values and reference loops."""

from __future__ import annotations

import math

import pytest
from reference_impls import pass_at_k_reference

from e2c.eval.metrics import (
    default_ks,
    maj_at_k,
    majority_correct,
    pass_at_k,
    summarize,
)
from e2c.rewards.vote import CORRECT, answer_classes, majority_class


def test_pass_at_k_matches_the_binomial_definition() -> None:
    for n in range(1, 11):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert math.isclose(pass_at_k(n, c, k), pass_at_k_reference(n, c, k), abs_tol=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k", "value"),
    [(4, 1, 2, 0.5), (5, 2, 3, 0.9), (8, 0, 8, 0.0), (8, 8, 1, 1.0), (8, 3, 1, 3 / 8), (4, 2, 2, 5 / 6)],
)
def test_pass_at_k_hand_values(n: int, c: int, k: int, value: float) -> None:
    assert math.isclose(pass_at_k(n, c, k), value)


def test_pass_at_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)


def test_default_ks() -> None:
    assert default_ks(8) == [1, 2, 4, 8]
    assert default_ks(6) == [1, 2, 4, 6]
    assert default_ks(1) == [1]


def test_votes() -> None:
    classes = answer_classes(["0.5", "1/2", " 7  ", None, " ", "7"], [True, True, False, False, False, False])
    assert classes == [CORRECT, CORRECT, 1, None, None, 1]  # correct ones together; no answer does not vote
    assert not majority_correct(["a", "b", "a"], [False, True, False])
    assert majority_correct(["b", "a"], [True, False])  # a tie goes to the answer seen first
    assert not majority_correct(["a", "b"], [False, True])
    assert majority_correct([None, None, "c"], [False, False, True])  # no answer does not vote
    assert not majority_correct([None, None], [False, False])
    assert maj_at_k(["x", "c", "c"], [False, True, True], 1) is False
    assert maj_at_k(["x", "c", "c"], [False, True, True], 3) is True


def majority_reference(keys, corrects) -> bool:
    """Plain loop: count votes, pick the highest count, earliest first."""
    counts: dict[str, int] = {}
    order: list[str] = []
    for k in keys:
        if k is None:
            continue
        if k not in counts:
            counts[k] = 0
            order.append(k)
        counts[k] += 1
    if not counts:
        return False
    best = order[0]
    for k in order:
        if counts[k] > counts[best]:
            best = k
    return any(c for k, c in zip(keys, corrects) if k == best)


def test_majority_matches_reference_loop() -> None:
    import random

    rng = random.Random(0)
    for _ in range(500):
        n = rng.randint(1, 8)
        keys = [rng.choice([None, "a", "b", "c"]) for _ in range(n)]
        corrects = [k == "b" for k in keys]
        assert majority_correct(keys, corrects) == majority_reference(keys, corrects)


def pred(correct, extracted, status="ok", finish="stop", reason=None, e=10, x=30, forced=False):
    return {
        "correct": correct,
        "extracted": extracted,
        "chain_status": status,
        "finish_reason": finish,
        "reason": reason or ("correct" if correct else ("no_answer" if extracted is None else "wrong")),
        "explore_tokens": e,
        "execute_tokens": x,
        "forced_close": forced,
    }


def test_summary_hand_computed() -> None:
    p1 = [
        pred(True, "5"),
        pred(False, "6"),
        pred(True, "5.0"),
        pred(False, "6", finish="length", status="truncated_execution"),
    ]
    p2 = [
        pred(False, "1", e=20, x=40),
        pred(False, "1", forced=True),
        pred(False, None, status="no_tags", finish="length", e=0, x=0),
        pred(True, "9"),
    ]
    m = summarize([p1, p2])
    assert (m["problems"], m["samples"]) == (2, 8)
    assert math.isclose(m["pass@1"], (0.5 + 0.25) / 2)
    assert math.isclose(m["pass@2"], ((1 - 1 / 6) + 0.5) / 2)
    assert m["pass@4"] == 1.0
    # Problem 1: correct 2 votes vs "6" 2 votes, correct seen first -> right; problem 2: "1" wins -> wrong.
    assert m["maj@1"] == m["maj@2"] == m["maj@4"] == 0.5
    assert m["format_rate"] == 6 / 8 and m["truncation_rate"] == 2 / 8
    assert m["no_answer_rate"] == 1 / 8 and m["forced_close_rate"] == 1 / 8
    assert m["explore_tokens"] == (10 * 6 + 20 + 0) / 8 and m["execute_tokens"] == (30 * 6 + 40) / 8
    assert m["total_tokens"] == m["explore_tokens"] + m["execute_tokens"]
    assert set(summarize([p1, p2], ks=[1, 3])) >= {"pass@3", "maj@3"}


def test_wrong_answers_are_grouped_by_the_grader() -> None:
    # Regression: "3", "3.0" and "x=3" voted as three answers, so a split wrong majority lost to one right
    # answer and maj@k was biased upward.
    classes = answer_classes(["3", "3.0", "x=3", "\\frac{6}{2}", "4"], [False, False, False, False, True])
    assert classes == [1, 1, 1, 1, CORRECT]
    p = [pred(True, "4"), pred(False, "3"), pred(False, "3.0"), pred(False, "x=3")]
    assert summarize([p], ks=[4])["maj@4"] == 0.0
    # Symbolic equivalence for wrong answers too, and distinct answers stay apart.
    # (a bound far above the vote's: a first symbolic check in a fresh worker beside a training run took longer)
    assert answer_classes(["x^2+2x+1", "(x+1)^2", "x+1"], [False] * 3, timeout=60) == [1, 1, 2]
    # Letters for multiple choice: case and spacing do not split a vote.
    assert answer_classes(["b", " B", "C"], [False] * 3, kind="mcq") == [1, 1, 2]


def test_majority_class_weights_and_ties() -> None:
    assert majority_class([1, 2, 2, None]) == 2
    assert majority_class([1, 2]) == 1  # a tie goes to the class seen first
    assert majority_class([1, 2, 2], [3.0, 1.0, 1.0]) == 1
    assert majority_class([None, None]) is None


def classes_reference(answers, corrects, same) -> list:
    """Plain loop: compare each wrong answer with every earlier wrong answer; the earliest equal one's
    class wins."""
    out: list = []
    firsts: list[tuple[str, int]] = []
    for a, ok in zip(answers, corrects):
        if ok:
            out.append(CORRECT)
        elif a is None or not a.strip():
            out.append(None)
        else:
            cls = next((c for b, c in firsts if same(a, b)), None)
            if cls is None:
                cls = len({c for _, c in firsts}) + 1
            firsts.append((a, cls))
            out.append(cls)
    return out


def test_answer_classes_match_reference_loop() -> None:
    import random

    from e2c.rewards.math_equiv import quick_equal

    rng = random.Random(1)
    pool = ["1", "1.0", "2", "2.00", "1/2", "0.5", "x=2", "3", None, " "]
    for _ in range(300):
        n = rng.randint(1, 8)
        answers = [rng.choice(pool) for _ in range(n)]
        corrects = [rng.random() < 0.2 for _ in range(n)]
        got = answer_classes(answers, corrects)
        assert got == classes_reference(answers, corrects, lambda a, b: bool(quick_equal(a, b)))
