"""Gold/prediction table for the grader: what must match and what must not.

Predictions are written the way models write them (inside ``\\boxed{}`` at the end of an execution,
or as "The final answer is ..."), golds the way benchmark files store them.
"""

from __future__ import annotations

import pytest

from e2c.rewards import grade

# (gold, predicted answer as it appears inside \boxed{}, expected)
MATH_TABLE: list[tuple[str, str, bool]] = [
    # integers and signs
    ("18", "18", True),
    ("18", "18.0", True),
    ("18", "18.00", True),
    ("18", "+18", True),
    ("18", "17", False),
    ("-3", "-3", True),
    ("-3", "3", False),
    ("0", "0", True),
    ("0", "-0", True),
    ("1000", "1,000", True),
    ("1000", "1{,}000", True),
    ("1000000", "1,000,000", True),
    ("1000", "100", False),
    ("073", "73", True),
    ("204", "\\textbf{(204)}", True),
    ("12", "x = 12", True),
    ("12", "n=12", True),
    ("12", "12.5", False),
    ("5", "\\$5", True),
    ("5", "5 \\text{ dollars}", True),
    ("5", "6 \\text{ dollars}", False),
    # fractions and decimals
    ("\\frac{1}{2}", "0.5", True),
    ("\\frac{1}{2}", "1/2", True),
    ("\\frac{1}{2}", "\\dfrac{1}{2}", True),
    ("\\frac{1}{2}", "\\tfrac12", True),
    ("\\frac{1}{2}", "\\frac{2}{4}", True),
    ("\\frac{1}{2}", "0.51", False),
    ("\\frac{1}{3}", "0.3333333", True),
    ("\\frac{1}{3}", "0.33", False),
    ("-\\frac{3}{4}", "-0.75", True),
    ("-\\frac{3}{4}", "\\frac{-3}{4}", True),
    ("-\\frac{3}{4}", "0.75", False),
    ("\\frac{7}{2}", "3.5", True),
    ("\\frac{7}{2}", "3\\frac{1}{2}", True),
    ("2.5", "\\frac{5}{2}", True),
    ("2.5", "2.50", True),
    ("2.5", "25", False),
    ("0.125", "\\frac{1}{8}", True),
    ("1.6", "1.6 \\mathrm{~cm}", True),
    ("1.6", "1.7", False),
    # radicals, pi, expressions
    ("\\sqrt{2}", "\\sqrt{2}", True),
    ("\\sqrt{2}", "2^{1/2}", True),
    ("\\sqrt{2}", "\\frac{2}{\\sqrt{2}}", True),
    ("\\sqrt{2}", "1.41", False),
    ("2\\sqrt{3}", "\\sqrt{12}", True),
    ("2\\sqrt{3}", "3\\sqrt{2}", False),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}\\sqrt{3}", True),
    ("3\\pi", "3 \\pi", True),
    ("3\\pi", "\\pi \\cdot 3", True),
    ("3\\pi", "9.42", False),
    ("2\\pi", "\\pi", False),
    ("x^2+2x+1", "(x+1)^2", True),
    ("x^2+2x+1", "(x-1)^2", False),
    ("x(x+2)", "x^2+2x", True),
    ("\\frac{x}{2}", "0.5x", True),
    ("2^{10}", "1024", True),
    ("2^{10}", "1000", False),
    ("\\binom{5}{2}", "10", True),
    ("5!", "120", True),
    ("e^{2}", "e^2", True),
    ("\\ln 2", "\\ln(2)", True),
    ("a+b", "b+a", True),
    ("a-b", "b-a", False),
    ("2n-2", "2(n-1)", True),
    ("2n", "n", False),
    ("\\frac{1}{2n+2}", "\\frac{1}{2(n+1)}", True),
    # degrees
    ("30", "30^\\circ", True),
    ("30^\\circ", "30", True),
    ("30^{\\circ}", "30°", True),
    ("45", "45^\\circ", True),
    ("45", "60^\\circ", False),
    ("90^\\circ", "90", True),
    # percents
    ("50\\%", "50\\%", True),
    ("50\\%", "50", True),
    ("50\\%", "0.5", True),
    ("50", "50\\%", True),
    ("0.5", "50\\%", True),
    ("25\\%", "0.25", True),
    ("25\\%", "0.5", False),
    ("12.5\\%", "\\frac{1}{8}", True),
    ("12.5\\%", "\\frac{1}{4}", False),
    ("20\\%", "20", True),
    ("20\\%", "25", False),
    # sets and tuples
    ("\\{1, 2\\}", "\\{2, 1\\}", True),
    ("\\{1, 2\\}", "\\{1, 3\\}", False),
    ("\\{1,2,3\\}", "\\{3,2,1\\}", True),
    ("2, 3", "3, 2", True),
    ("2, 3", "2", False),
    ("-1, 2", "2, -1", True),
    ("(1, 2)", "(1, 2)", True),
    ("(1, 2)", "(2, 1)", False),
    ("(4,5,7)", "(4, 5, 7)", True),
    ("1, 2, 3", "1, 2", False),
    ("\\emptyset", "\\emptyset", True),
    # intervals and inequalities
    ("(1, 2]", "(1, 2]", True),
    ("(1, 2]", "(1, 2)", False),
    ("[0, \\infty)", "[0, \\infty)", True),
    ("[0, \\infty)", "(0, \\infty)", False),
    ("(-\\infty, 3)", "(-\\infty,3)", True),
    ("(-\\infty, 3)", "(-\\infty, 4)", False),
    ("[2, 5]", "[2,5]", True),
    ("(-2, 2)", "(-2,2)", True),
    ("x > 3", "x > 3", True),
    ("x > 3", "x < 3", False),
    ("(-\\infty, 1) \\cup (2, \\infty)", "(-\\infty,1)\\cup(2,\\infty)", True),
    ("(-\\infty, 1) \\cup (2, \\infty)", "(-\\infty,1)\\cup(3,\\infty)", False),
    # matrices and vectors
    ("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", True),
    ("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{pmatrix}1&2\\\\4&3\\end{pmatrix}", False),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", True),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}2\\\\1\\end{pmatrix}", False),
    (
        "\\begin{pmatrix} 1/2 & 0 \\\\ 0 & 1 \\end{pmatrix}",
        "\\begin{pmatrix}0.5&0\\\\0&1\\end{pmatrix}",
        True,
    ),
    ("\\begin{bmatrix} 2 & 0 \\\\ 0 & 2 \\end{bmatrix}", "\\begin{bmatrix}2&0\\\\0&2\\end{bmatrix}", True),
    # LaTeX text answers
    ("\\text{Yes}", "Yes", True),
    ("\\text{yes}", "\\text{Yes}", True),
    ("\\text{Yes}", "No", False),
    ("\\text{(B)}", "\\text{(B)}", True),
    ("\\text{Monday}", "\\textbf{Monday}", True),
    ("\\text{Monday}", "Tuesday", False),
    ("\\text{odd}", "odd", True),
    ("\\text{odd}", "even", False),
    # equations with a variable name
    ("y = 2x + 3", "y=2x+3", True),
    ("y = 2x + 3", "2x+3", True),
    ("y = 2x + 3", "2x+4", False),
    ("f(x)=2x", "2x", True),
    # big numbers and scientific notation
    ("1.5 \\times 10^{3}", "1500", True),
    ("6.02 \\times 10^{23}", "6.02\\times10^{23}", True),
    ("10^{6}", "1000000", True),
    ("10^{6}", "100000", False),
    ("123456789", "123456789", True),
    ("123456789", "123456788", False),
    # trailing punctuation, dollars, spacing commands
    ("42", "42.", True),
    ("42", "$42$", True),
    ("42", "\\,42\\,", True),
    ("42", "\\left(42\\right)", True),
    ("-7", "\\left(-7\\right)", True),
    ("1/4", "\\frac{1}{4}", True),
    ("1/4", "\\frac{1}{5}", False),
]

# (options, gold letter, response text, expected)
OPTS = {"A": "Aspirin", "B": "Heparin", "C": "Warfarin", "D": "Clopidogrel"}
MCQ_TABLE: list[tuple[dict | None, str, str, bool]] = [
    (None, "B", "\\boxed{B}", True),
    (None, "B", "\\boxed{(B)}", True),
    (None, "B", "\\boxed{\\text{B}}", True),
    (None, "B", "The answer is (B).", True),
    (None, "B", "The correct answer is B.", True),
    (None, "B", "Answer: B", True),
    (None, "B", "answer: B", True),
    (None, "B", "B", True),
    (None, "B", "(B)", True),
    (None, "B", "B.", True),
    (None, "B", "The answer is option B", True),
    (None, "B", "The answer is (C).", False),
    (None, "B", "\\boxed{C}", False),
    (None, "B", "Answer: D", False),
    (None, "B", "I am not sure.", False),
    (None, "B", "", False),
    (OPTS, "C", "\\boxed{C. Warfarin}", True),
    (OPTS, "C", "\\boxed{Warfarin}", True),
    (OPTS, "C", "The best choice here:\nWarfarin", True),
    (OPTS, "C", "\\boxed{Heparin}", False),
    (OPTS, "C", "First A looked right, but the answer is (C).", True),
    (OPTS, "C", "Considering all of them, none fits.", False),
    (OPTS, "Warfarin", "\\boxed{C}", True),
    (OPTS, "C", "\\boxed{E}", False),
]


def _response(pred: str) -> str:
    return (
        "I need to make a step-by-step plan.\n1. Compute.\n2. Report.</EXPLORATION>"
        f"<EXECUTION>Step 1: Compute.\nStep 2: Report: \\boxed{{{pred}}}</EXECUTION>"
    )


def test_table_sizes() -> None:
    assert len(MATH_TABLE) + len(MCQ_TABLE) >= 150
    assert sum(not e for *_, e in MATH_TABLE) >= 40  # plenty of pairs that must NOT match


@pytest.mark.parametrize(("gold", "pred", "expected"), MATH_TABLE)
def test_math_table_cpu(gold: str, pred: str, expected: bool) -> None:
    res = grade(_response(pred), gold, timeout=10)
    assert res.reason != "timeout"
    assert res.correct is expected, f"gold={gold!r} pred={pred!r} -> {res}"


@pytest.mark.parametrize(("options", "gold", "text", "expected"), MCQ_TABLE)
def test_mcq_table_cpu(options: dict | None, gold: str, text: str, expected: bool) -> None:
    res = grade(f"plan</EXPLORATION><EXECUTION>{text}</EXECUTION>", gold, "mcq", options=options)
    assert res.correct is expected, f"gold={gold!r} text={text!r} -> {res}"
    if not expected and res.extracted is None:
        assert res.reason == "no_answer" and res.score == 0.0  # never a 0.25 guess


@pytest.mark.parametrize(
    ("text", "gold"),
    [
        ("So the final answer is 18.", "18"),
        ("The answer is $\\frac{1}{2}$.", "0.5"),
        ("Final Answer: 7", "7"),
        ("#### 42", "42"),
    ],
)
def test_phrase_answers_cpu(text: str, gold: str) -> None:
    assert grade(text, gold, fmt=None).correct
