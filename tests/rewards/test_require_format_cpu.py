"""The reward's format gate (``require_format``): a right answer counts only in a well-formed chain.

Without it, a small policy's right answers written with fragments of the tags' spelling instead of the tag
tokens were rewarded, and the quickstart's GRPO taught the model to drop its tags (docs/results.md, "RL at this scale")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.rewards.verl_score import compute_score

WELL = (
    "I need a plan.\n1. Multiply.\n</EXPLORATION><EXECUTION>\nStep 1: 4 * 9 = 36.\n\\boxed{36}\n</EXECUTION>"
)
# A chain sampled from the quickstart's SFT model at T 0.7: the tag tokens replaced by spelling fragments.
FRAGMENTS = "I need a plan.\n1. Multiply.\nEXAMPLES\nStep 1: 4 * 9 = 36.\n\\boxed{36}\nUTION"


@pytest.mark.parametrize(
    ("text", "gate", "score", "acc", "answer", "malformed"),
    [
        (WELL, False, 1.0, 1.0, 1.0, 0.0),
        (WELL, True, 1.0, 1.0, 1.0, 0.0),
        (FRAGMENTS, False, 1.0, 1.0, 1.0, 1.0),
        (FRAGMENTS, True, 0.0, 0.0, 1.0, 1.0),
        (WELL.replace("36}", "35}"), True, 0.0, 0.0, 0.0, 0.0),
        (FRAGMENTS.replace("36}", "35}"), True, 0.0, 0.0, 0.0, 0.0),
    ],
)
def test_gate(text: str, gate: bool, score: float, acc: float, answer: float, malformed: float) -> None:
    out = compute_score("synthetic", text, "36", {"require_format": gate})
    assert (out["score"], out["acc"], out["answer_correct"], out["correct_malformed"]) == (
        score,
        acc,
        answer,
        malformed,
    )
    assert out["well_formed"] == float(text.startswith("I need") and "</EXECUTION>" in text)


def test_gate_keeps_the_plan_bonus_on_well_formed_chains() -> None:
    plain = compute_score("synthetic", WELL, "36", {"plan_bonus": True})
    gated = compute_score("synthetic", WELL, "36", {"plan_bonus": True, "require_format": True})
    assert gated["score"] == plain["score"] and gated["acc"] == 1.0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.booleans())
def test_gate_never_raises_and_only_lowers(text: str, gate: bool) -> None:
    """Arbitrary text: the gated score is the ungated one or 0, and 0 exactly for a malformed chain."""
    plain = compute_score("synthetic", text, "7")
    out = compute_score("synthetic", text, "7", {"require_format": gate})
    if gate and not out["well_formed"]:
        assert out["score"] == 0.0 and out["acc"] == 0.0
    else:
        assert out["score"] == plain["score"] and out["acc"] == plain["acc"]
    assert out["answer_correct"] == plain["acc"]
    assert out["correct_malformed"] == float(plain["acc"] == 1.0 and not out["well_formed"])
