"""The grader: answer extraction, math equivalence with hard timeouts, multiple choice, plan adherence,
format checks. :func:`grade` is the one entry; :func:`compute_score` adapts it to verl; every rule that
depends on the answer kind is one entry of :data:`ANSWER_KINDS` (:mod:`e2c.rewards.kinds`)."""

from e2c.rewards.extract import extract_answer, last_boxed, reference_answer
from e2c.rewards.grader import GradeResult, format_score, grade, grade_many
from e2c.rewards.kinds import ANSWER_KINDS, KINDS, AnswerKind
from e2c.rewards.math_equiv import math_equal
from e2c.rewards.mcq import extract_choice, reference_choice
from e2c.rewards.plan import plan_adherence
from e2c.rewards.verl_score import compute_score, kind_for_source

__all__ = [
    "ANSWER_KINDS",
    "KINDS",
    "AnswerKind",
    "GradeResult",
    "compute_score",
    "extract_answer",
    "extract_choice",
    "format_score",
    "grade",
    "grade_many",
    "kind_for_source",
    "last_boxed",
    "math_equal",
    "plan_adherence",
    "reference_answer",
    "reference_choice",
]
