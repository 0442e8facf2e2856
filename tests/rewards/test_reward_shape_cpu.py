"""Reward shapes (e2c.rewards.shape): each named shape against a plain table of what a chain earns, and the
reward function verl calls against the same table on arbitrary text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.rewards.shape import REWARD_SHAPES, reward_shape, shaped_score
from e2c.rewards.verl_score import compute_score

# (right, well-formed) -> reward, written out per shape: the reference the function must match.
TABLE = {
    "correct": {(True, True): 1.0, (True, False): 1.0, (False, True): 0.0, (False, False): 0.0},
    "credit": {(True, True): 1.0, (True, False): 1.0, (False, True): 0.1, (False, False): 0.0},
    "gate": {(True, True): 1.0, (True, False): 0.0, (False, True): 0.1, (False, False): 0.0},
    "levels": {(True, True): 1.0, (True, False): 0.5, (False, True): 0.1, (False, False): 0.0},
}
WELL = "A plan.\n1. Add.\n</EXPLORATION><EXECUTION>\nStep 1: 2 + 2 = 4.\n\\boxed{4}\n</EXECUTION>"


def test_every_shape_is_in_the_table() -> None:
    assert set(REWARD_SHAPES) == set(TABLE)


@pytest.mark.parametrize("shape", list(TABLE))
@pytest.mark.parametrize("right", [True, False])
@pytest.mark.parametrize("well", [True, False])
def test_shaped_score_matches_the_table(shape: str, right: bool, well: bool) -> None:
    kwargs = reward_shape(shape).reward_kwargs()
    assert shaped_score(float(right), right, well, kwargs) == pytest.approx(TABLE[shape][(right, well)])


@pytest.mark.parametrize("shape", list(TABLE))
def test_the_reward_function_pays_the_table(shape: str) -> None:
    kwargs = reward_shape(shape).reward_kwargs()
    cases = {
        (True, True): WELL,
        (False, True): WELL.replace("{4}", "{5}"),
        (True, False): "no tags \\boxed{4}",
        (False, False): "no tags \\boxed{5}",
    }
    for (right, well), text in cases.items():
        out = compute_score("synthetic", text, "4", {"prefilled": True}, **kwargs)
        assert out["answer_correct"] == float(right) and out["well_formed"] == float(well)
        assert out["score"] == pytest.approx(TABLE[shape][(right, well)]), (shape, right, well)


def test_an_unknown_shape_names_the_choices() -> None:
    with pytest.raises(ValueError, match="valid: correct, credit, gate, levels"):
        reward_shape("gated")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300), st.sampled_from(list(TABLE)))
def test_on_arbitrary_text_the_reward_is_the_table_entry(text: str, shape: str) -> None:
    """Whatever the text, the reward is the table's entry for what the grader says of it: the shape never
    changes whether an answer is right, only what its form is worth."""
    kwargs = reward_shape(shape).reward_kwargs()
    out = compute_score("synthetic", text, "7", **kwargs)
    plain = compute_score("synthetic", text, "7")
    assert out["answer_correct"] == plain["acc"]
    key = (bool(out["answer_correct"]), bool(out["well_formed"]))
    assert out["score"] == pytest.approx(TABLE[shape][key])
