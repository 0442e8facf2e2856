"""Answer extraction, multiple-choice letters and plan adherence."""

from __future__ import annotations

import pytest

from e2c.rewards.extract import boxed_contents, extract_answer, last_boxed, reference_answer
from e2c.rewards.mcq import extract_choice, reference_choice
from e2c.rewards.plan import plan_adherence, step_titles


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so \\boxed{42}.", "42"),
        ("\\boxed{\\frac{1}{2}} then \\boxed{3}", "3"),
        ("nested \\boxed{\\left\\{1,\\{2\\}\\right\\}}", "\\left\\{1,\\{2\\}\\right\\}"),
        ("\\fbox{7}", "7"),
        ("boxed{12} without backslash", "12"),
        ("\\boxed 5 is it", "5"),
        ("\\boxed{} empty then \\boxed{9}", "9"),
        ("unclosed \\boxed{12", None),
        ("\\boxed{1} and then an unclosed \\boxed{2", "1"),
        ("nothing here", None),
    ],
)
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


def test_boxed_all_and_escaped_braces() -> None:
    assert boxed_contents("\\boxed{a} x \\boxed{b\\}c}") == ["a", "b\\}c"]


@pytest.mark.parametrize(
    ("text", "answer", "method"),
    [
        ("work #### 1,234", "1,234", "gsm8k"),
        ("The final answer is 18.", "18", "phrase"),
        ("Final Answer: $\\frac{1}{2}$", "\\frac{1}{2}", "phrase"),
        ("the answer is \\boxed{4}.", "4", "boxed"),
        ("no answer stated 3 4", None, "none"),
    ],
)
def test_extract_answer(text: str, answer: str | None, method: str) -> None:
    assert extract_answer(text) == (answer, method)


def test_fallback_number_only_when_asked() -> None:
    assert extract_answer("we get 3 and then 17")[0] is None
    assert extract_answer("we get 3 and then 17", fallback_number=True) == ("17", "number")


@pytest.mark.parametrize(
    ("gold", "expected"),
    [
        ("Janet sells 9 eggs.\n#### 18", "18"),
        ("so $x=\\boxed{5}$", "5"),
        (27.0, "27"),
        (["$\\frac{1}{2}$"], "\\frac{1}{2}"),
        (["1", "2"], "1, 2"),
        ("$3$", "3"),
        (None, None),
        ("", None),
    ],
)
def test_reference_answer(gold, expected) -> None:
    assert reference_answer(gold) == expected


def test_choice_methods() -> None:
    opts = {"A": "O group and Rh+ve", "B": "O group and Rh-ve"}
    assert extract_choice("O group and Rh-ve", opts) == ("B", "bare")
    assert extract_choice("\\boxed{A}") == ("A", "boxed")
    assert extract_choice("The answer is (C).") == ("C", "phrase")
    assert extract_choice("The answer is a mystery.") == (None, "none")
    assert reference_choice(2) == "C" and reference_choice("(D)") == "D"
    assert reference_choice("O group and Rh+ve", opts) == "A"
    assert reference_choice("zzz", opts) is None


PLAN = """I need to make a step-by-step plan.
1. Count the eggs left after breakfast and baking.
2. Multiply the remaining eggs by the price.
3. Report the daily income."""


def test_plan_adherence() -> None:
    assert step_titles(PLAN) == [
        "Count the eggs left after breakfast and baking.",
        "Multiply the remaining eggs by the price.",
        "Report the daily income.",
    ]
    full = (
        "Step 1: Count the eggs left: 16-3-4=9.\nStep 2: Multiply the remaining eggs by the price: 18.\n"
        "Step 3: Report the daily income: \\boxed{18}"
    )
    assert plan_adherence(PLAN, full) == 1.0
    partial = "Step 1: Count the eggs left after baking: 9.\nThen some unrelated text."
    assert plan_adherence(PLAN, partial) == pytest.approx(1 / 3)
    assert plan_adherence("no numbered steps here", full) == 0.0
    assert plan_adherence(PLAN, "") == 0.0
