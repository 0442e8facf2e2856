"""Reward shapes: how a chain's format enters the RL reward beside its correctness, one named choice that
the RL run, the pass-rate filter and a study all read from here (:data:`REWARD_SHAPES`).

The grader (:mod:`e2c.rewards.grader`) decides whether an answer is right, the same function for the
evaluation and the reward; a shape only says what a right answer in a malformed chain and a well-formed
wrong chain are worth. Measured on the embedded model (docs/results.md): a format gate paid 0 for 80% of
an undertrained start's right answers, and a format credit without the gate carried 81% of the reward's
within-group variation, so the default is ``correct``, the metric itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RewardShape:
    """How a chain's format enters the reward beside its correctness: the values of the reward function's
    ``require_format``, ``format_credit`` and ``malformed_credit`` keywords that one named shape stands for.

    A right answer scores its correctness term (1, or a code answer's share under ``code_reward=fraction``);
    with ``require_format`` one in a malformed chain keeps only ``malformed_credit`` of it; a well-formed
    chain with a wrong answer earns ``format_credit``. The evaluation counts a right answer whatever its
    chain's form, so only ``correct`` is the metric itself; the others are departures a study measures.
    """

    name: str
    require_format: bool
    format_credit: float
    malformed_credit: float
    help: str = ""

    def reward_kwargs(self) -> dict[str, Any]:
        """The reward function's keywords for this shape (verl's ``reward.custom_reward_function.reward_kwargs``)."""
        return {
            "require_format": self.require_format,
            "format_credit": self.format_credit,
            "malformed_credit": self.malformed_credit,
        }


REWARD_SHAPES: dict[str, RewardShape] = {
    # the evaluation's correctness and nothing else: the reward agrees with the metric by construction
    "correct": RewardShape("correct", False, 0.0, 0.0, "1 for a right answer, as the evaluation counts it"),
    "credit": RewardShape(
        "credit", False, 0.1, 0.0, "correct, + 0.1 for a well-formed chain with a wrong answer"
    ),
    "gate": RewardShape(
        "gate", True, 0.1, 0.0, "TinyZero's 1 / 0.1 / 0: a right answer in a malformed chain scores 0"
    ),
    "levels": RewardShape(
        "levels",
        True,
        0.1,
        0.5,
        "right and well-formed 1, right but malformed 0.5, well-formed but wrong 0.1",
    ),
}
DEFAULT_REWARD_SHAPE = "correct"


def reward_shape(name: str) -> RewardShape:
    """The named shape of :data:`REWARD_SHAPES`; anything else is a ``ValueError`` naming the choices.

    >>> reward_shape("levels").malformed_credit
    0.5
    """
    try:
        return REWARD_SHAPES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown reward shape {name!r}; valid: {', '.join(REWARD_SHAPES)}") from None


def shaped_score(score: float, correct: bool, well_formed: bool, shape_kwargs: Mapping[str, Any]) -> float:
    """The reward of a graded chain under the format keywords of :class:`RewardShape`: ``score`` (the grader's
    score, or a code answer's) kept for a well-formed chain or without ``require_format``, scaled by
    ``malformed_credit`` for a malformed one under it, plus ``format_credit`` for a well-formed wrong answer.

    >>> levels = REWARD_SHAPES["levels"].reward_kwargs()
    >>> [shaped_score(1.0, True, w, levels) for w in (True, False)], shaped_score(0.0, False, True, levels)
    ([1.0, 0.5], 0.1)
    """
    gated = bool(shape_kwargs.get("require_format", False)) and not well_formed
    kept = float(shape_kwargs.get("malformed_credit", 0.0) or 0.0) * score if gated else score
    credit = float(shape_kwargs.get("format_credit", 0.0) or 0.0) if well_formed and not correct else 0.0
    return kept + credit


def overlong_problem(reward_kwargs: Mapping[str, Any]) -> str | None:
    """What is wrong with an enabled overlong penalty's sizes (``reward.reward_kwargs``), or None: its buffer
    must be a length in ``(0, max_resp_len]``. The RL launcher asks before anything starts; the reward
    manager (:mod:`e2c.rl.reward`) again, for a run started without it (verl's ``main_ppo`` called directly).

    >>> overlong_problem({"overlong_buffer_cfg": {"enable": True, "len": 32}, "max_resp_len": 24})
    'overlong penalty needs 0 < reward.reward_kwargs.overlong_buffer_cfg.len <= reward.reward_kwargs.max_resp_len; got len=32, max_resp_len=24'
    >>> overlong_problem({"overlong_buffer_cfg": {"enable": False, "len": 32}, "max_resp_len": 24}) is None
    True
    """
    overlong = reward_kwargs.get("overlong_buffer_cfg", None)
    max_len = reward_kwargs.get("max_resp_len", None)
    if overlong is None or not overlong.get("enable", False):
        return None
    if max_len and 0 < int(overlong.get("len", 0)) <= int(max_len):
        return None
    return (
        "overlong penalty needs 0 < reward.reward_kwargs.overlong_buffer_cfg.len <= "
        f"reward.reward_kwargs.max_resp_len; got len={overlong.get('len')}, max_resp_len={max_len}"
    )
