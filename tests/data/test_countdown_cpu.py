"""Countdown grading: an AST walk over exact fractions, never eval."""

from __future__ import annotations

import json

import pytest

from e2c.rewards import countdown
from e2c.rewards.grader import grade
from e2c.rewards.verl_score import compute_score

GOLD = {"target": 18, "numbers": [3, 5, 2, 8]}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("(5-3)*8+2", (True, "ok")),
        ("2 + 8 \\times (5 - 3)", (True, "ok")),
        ("(5-3)*8+2 = 18", (True, "ok")),
        ("(5+3)*2+8", (False, "wrong_value")),
        ("(5-3)*8", (False, "wrong_numbers")),
        ("(5-3)*8+2+0", (False, "wrong_numbers")),
        ("__import__('os')", (False, "not_arithmetic")),
        ("2**4+2", (False, "not_arithmetic")),
        ("8/(5-5)+3", (False, "not_arithmetic")),
        ("18", (False, "wrong_numbers")),
        (None, (False, "not_arithmetic")),
    ],
)
def test_check(expr, expected) -> None:
    assert countdown.check(expr, GOLD) == expected
    assert countdown.check(expr, json.dumps(GOLD)) == expected


def test_division_is_exact() -> None:
    assert countdown.check("(8/3)*3+5+2-3", {"target": 12, "numbers": [8, 3, 3, 5, 2, 3]}) == (True, "ok")


def test_grader_and_verl_entry() -> None:
    resp = "plan</EXPLORATION><EXECUTION>so \\boxed{(5-3)*8+2}</EXECUTION>"
    r = grade(resp, json.dumps(GOLD), "countdown")
    assert r.correct and r.reason == "correct" and r.chain_status == "ok"
    assert grade("no answer", GOLD, "countdown").reason == "no_answer"
    assert grade(resp, "not json", "countdown").reason == "unparseable_gold"
    out = compute_score("synthetic/countdown", resp, json.dumps(GOLD), {"kind": "countdown"})
    assert out["score"] == 1.0
