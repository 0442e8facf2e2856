"""The grader never raises and is never fooled: regressions, a hostile corpus, property-based tests.

Each regression names the defect it pins (all reproduced on the main branch before the fix).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from e2c.chain import E2C, PLAIN, THINK
from e2c.chain.parse import STATUSES as CHAIN_STATUSES
from e2c.rewards import extract_answer, extract_choice, format_score, grade, last_boxed
from e2c.rewards.extract import boxed_contents
from e2c.rewards.hostile import hostile_corpus
from e2c.rewards.math_equiv import quick_equal

ROOT = Path(__file__).resolve().parents[2]
REASONS = {"correct", "wrong", "no_answer", "timeout", "unparseable_gold", "error"}
STATUSES = set(CHAIN_STATUSES)
OPTS = {"A": "Aspirin", "B": "Heparin", "C": "Warfarin", "D": "Clopidogrel"}


# ------------------------------------------------------------------------------------------ regressions
def test_huge_literal_is_graded_not_raised() -> None:
    # Was: OverflowError "integer division result too large for a float" in the numeric fast path.
    r = grade("\\boxed{1e5000}", "\\frac{1}{2}", fmt=None)
    assert (r.reason, r.correct) == ("wrong", False)
    assert grade("\\boxed{10e4999}", "1e5000", fmt=None).correct
    assert not grade("\\boxed{1e-999999999}", "0", fmt=None).correct


def test_score_cli_scores_every_row_of_a_file_with_a_huge_literal(tmp_path: Path) -> None:
    rows = [
        {"response": "\\boxed{1e5000}", "gold": "\\frac{1}{2}"},
        {"response": "\\boxed{2}", "gold": "2"},
        {"response": "\\boxed{" + "9" * 50_000 + "}", "gold": "9"},
        {"response": "\\boxed{0.5}", "gold": "\\frac{1}{2}"},
    ]
    f = tmp_path / "rows.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = subprocess.run(
        [sys.executable, "-m", "e2c.eval.score", str(f), "--answer-key", "gold", "--timeout", "2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert (summary["n"], summary["correct"], summary["error"]) == (4, 2, 0)


def test_answer_only_in_the_plan_is_not_credited() -> None:
    # Was: correct, because a chain whose execution had no answer fell back to the whole text.
    r = grade("I guess \\boxed{42}. 1. Compute.</EXPLORATION><EXECUTION>Step 1: compute... ", "42")
    assert r.chain_status == "truncated_execution"
    assert (r.correct, r.reason, r.extracted) == (False, "no_answer", None)
    # A plan that states the answer in words is not an answer either.
    plan = "the answer is 42.\n1. Compute.</EXPLORATION><EXECUTION>Step 1: compute.</EXECUTION>"
    assert not grade(plan, "42").correct
    # The same holds for multiple choice and countdown.
    assert not grade("The answer is B.</EXPLORATION><EXECUTION>Work.</EXECUTION>", "B", "mcq").correct
    cd = {"target": 3, "numbers": [1, 2]}
    assert not grade("\\boxed{1+2}</EXPLORATION><EXECUTION>Work.</EXECUTION>", cd, "countdown").correct


def test_format_score_needs_the_answer_in_the_execution() -> None:
    # Was 1.0: a well-formed chain whose plan said "the answer is 42" but whose execution had no answer.
    text = "The answer is 42.\n1. Add.</EXPLORATION><EXECUTION>Step 1: add the numbers.</EXECUTION>"
    r = grade(text, "42")
    assert r.chain_status == "ok" and r.format_score == 0.5 and not r.correct
    good = "1. Add.</EXPLORATION><EXECUTION>Step 1: add: \\boxed{42}</EXECUTION>"
    assert grade(good, "42").format_score == 1.0
    assert format_score(E2C.parse(good), True) == 1.0


def test_answer_region_rules() -> None:
    # The execution whenever there is one; the text after a closed plan; else the whole text.
    assert grade("plan \\boxed{1}</EXPLORATION><EXECUTION>\\boxed{2}</EXECUTION>", "2").correct
    assert grade("plan \\boxed{1}</EXPLORATION> then \\boxed{2}", "2").chain_status == "missing_execution"
    assert grade("plan \\boxed{1}</EXPLORATION> then \\boxed{2}", "2").correct
    assert not grade("plan \\boxed{1}</EXPLORATION> then \\boxed{2}", "1").correct
    assert grade("no tags, just \\boxed{7}", "7").correct  # untagged: the whole text
    assert grade("<think>plan \\boxed{1}</think> so \\boxed{3}", "3", fmt=THINK).correct
    assert not grade("<think>plan \\boxed{1}</think> so", "1", fmt=THINK).correct
    assert not grade("EXPLORATION PHASE: \\boxed{1} EXECUTION PHASE: none", "1", fmt=PLAIN).correct


def test_explicit_statement_beats_a_later_option_mention() -> None:
    # Was A: the last "option X" anywhere won over "The answer is D".
    assert extract_choice("The answer is D. Option A is wrong because", OPTS) == ("D", "phrase")
    assert extract_choice("The correct option is C; option B fails.", OPTS) == ("C", "phrase")
    assert extract_choice("I choose (B). Option D was tempting.", OPTS) == ("B", "phrase")
    # A mention alone is not an answer.
    assert extract_choice("Option A is wrong because it bleeds.", OPTS) == (None, "none")


def test_react_acceptance_needs_an_answer_in_the_execution() -> None:
    from e2c.tts.base import Candidate
    from e2c.tts.methods import accepted

    plan_only = grade("\\boxed{12} 1. Add.</EXPLORATION><EXECUTION>Step 1: add.</EXECUTION>", "12")
    assert not accepted(Candidate("", None, plan_only))
    done = grade("1. Add.</EXPLORATION><EXECUTION>Step 1: \\boxed{12}</EXECUTION>", "12")
    assert accepted(Candidate("", None, done))


def test_voting_groups_equivalent_wrong_answers_in_tts() -> None:
    from e2c.tts.base import Candidate, weighted_vote

    def cand(a: str) -> Candidate:
        return Candidate("", None, grade(f"\\boxed{{{a}}}", "12", fmt=None))

    # Was 12: the three spellings of 3 voted separately and the single right answer won the tie.
    assert weighted_vote([cand("12"), cand("3"), cand("3.0"), cand("x=3")]).graded.extracted == "3"


# --------------------------------------------------------------------------------------- hostile corpus
@pytest.mark.parametrize("case", hostile_corpus(), ids=lambda c: c.name)
def test_hostile_corpus_grades_within_bound(case) -> None:
    timeout = 2.0
    t = time.perf_counter()
    r = grade(case.response, case.gold, case.kind, options=case.options, timeout=timeout)
    secs = time.perf_counter() - t
    assert r.reason in REASONS and r.reason != "error", r
    assert 0.0 <= r.score <= 1.0 and 0.0 <= r.format_score <= 1.0
    # The bound covers the symbolic check; extraction and the fast path add well under a second even for
    # a megabyte. (A fresh worker's start is paid by the warm-up in the first case, not counted here.)
    assert secs < timeout + 3.0, f"{case.name} took {secs:.2f} s"


def test_hostile_expected_outcomes() -> None:
    by = {c.name: c for c in hostile_corpus()}

    def g(name: str):
        c = by[name]
        return grade(c.response, c.gold, c.kind, options=c.options, timeout=2)

    assert g("huge_exponent_equal").correct and not g("huge_exponent").correct
    assert g("nested_boxes").correct and g("thousands_of_boxes").correct and g("tag_flood").correct
    assert g("phrase_then_blanks").correct and g("null_bytes").correct
    assert not g("answer_only_in_plan").correct
    assert g("mcq_statement_then_mention").correct and g("mcq_blank_flood").correct
    assert g("power_tower").reason in ("timeout", "wrong")


# ---------------------------------------------------------------------------------- property-based tests
FRAGMENTS = [
    "<EXPLORATION>",
    "</EXPLORATION>",
    "<EXECUTION>",
    "</EXECUTION>",
    "\\boxed{",
    "boxed{",
    "\\fbox{",
    "\\boxed ",
    "{",
    "}",
    "\\",
    "\\{",
    "\\}",
    "####",
    "The answer is ",
    "Final Answer: ",
    "option ",
    "Answer: ",
    "(B)",
    "B",
    "1. ",
    "\nStep 2: ",
    "42",
    "1/2",
    "\\frac{1}{2}",
    "1e5000",
    "0.5",
    "x=3",
    "$",
    "%",
    "\\%",
    "\x00",
    "\n",
    " " * 50,
    "é",
    "🙂",
    "\ud800",
    "^{",
    "\\left(",
    "\\sqrt{",
    ",",
    ".",
]
texts = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=40).map("".join),
)
GOLDS = ["42", "\\frac{1}{2}", "3", "x+1", "\\{1,2\\}", "1e5000", "", None, 7, [1, 2]]
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(texts, st.sampled_from(GOLDS))
def test_grade_never_raises_math(text: str, gold) -> None:
    r = grade(text, gold, timeout=2)
    assert r.reason in REASONS
    assert r.correct == (r.reason == "correct") and r.score in (0.0, 1.0)
    assert r.chain_status in STATUSES


@PROPS
@given(texts, st.sampled_from(["A", "B", "(C)", 3, None, "Heparin"]))
def test_grade_never_raises_mcq(text: str, gold) -> None:
    r = grade(text, gold, "mcq", options=OPTS)
    assert r.reason in REASONS and (r.extracted is None or r.extracted in "ABCD")


@PROPS
@given(texts)
def test_parse_invariants(text: str) -> None:
    for fmt in (E2C, PLAIN, THINK):
        p = fmt.parse(text)
        assert p.status in STATUSES
        assert p.text.endswith(text) and p.offset in (0, len(fmt.explore_open))
        for span, content in ((p.explore_span, p.exploration), (p.execute_span, p.execution)):
            if span is not None:
                assert 0 <= span[0] <= span[1] <= len(p.text) and p.text[span[0] : span[1]] == content
        assert p.answer_region in p.text
        if p.has_execution:
            assert p.answer_region == p.execution
        if p.well_formed:
            assert fmt.format_response(p.exploration, p.execution) == p.text


@PROPS
@given(texts)
def test_extraction_invariants(text: str) -> None:
    ans, method = extract_answer(text)
    assert method in ("boxed", "gsm8k", "phrase", "none")
    assert (ans is None) == (method == "none")
    if ans is not None:
        assert (ans.strip() and ans in text) or method == "phrase"
    assert boxed_contents(text) == boxed_contents_reference(text)
    assert last_boxed(text) == (boxed_contents_reference(text) or [None])[-1]


@PROPS
@given(texts, st.sampled_from(["A", "B", "C", "D"]), st.text(max_size=60))
def test_choice_statement_wins(prefix: str, letter: str, tail: str) -> None:
    got, _ = extract_choice(prefix, OPTS)
    assert got is None or got in "ABCD"
    # An explicit statement at the end of a text without boxes decides, whatever comes before it and
    # whatever mention of an option follows.
    if (
        "boxed" in prefix + tail
        or "fbox" in prefix + tail
        or re.search(r"(?i)answer|choice|option|choose|select|pick|go\s", tail)
    ):
        return
    assert extract_choice(f"{prefix}\nThe answer is {letter}. Option A is {tail}", OPTS)[0] == letter


@PROPS
@given(st.one_of(st.integers(-(10**30), 10**30), st.fractions(max_denominator=10**6)))
def test_numbers_equal_their_own_spellings(x) -> None:
    from fractions import Fraction

    s = str(x)
    assert quick_equal(s, s)
    if isinstance(x, int):
        assert quick_equal(f"{x:,}", s) and quick_equal(f"{x}.0", s)
    else:
        assert quick_equal(f"\\frac{{{x.numerator}}}{{{x.denominator}}}", s) or x.numerator < 0
        assert quick_equal(s, str(Fraction(x)))


# -------------------------------------------------------------------------------------- reference loops
def boxed_contents_reference(text: str) -> list[str]:
    """The original per-box scan (quadratic on nested boxes): the linear version must agree with it."""
    out: list[str] = []
    for m in re.finditer(r"\\?(?:boxed|fbox)\b", text):
        i = m.end()
        n = len(text)
        j = i
        while j < n and text[j] in " \t":
            j += 1
        if j < n and text[j] == "{":
            depth, k = 0, j
            while k < n:
                c = text[k]
                if c == "\\" and k + 1 < n:
                    k += 2
                    continue
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            if depth == 0 and k < n:
                content = text[j + 1 : k].strip()
                if content:
                    out.append(content)
        elif j > i and m.group(0).startswith("\\"):
            tail = re.match(r"[^\s$]+", text[j:])
            if tail:
                c = tail.group(0).rstrip(".,;")
                if c:
                    out.append(c)
    return out


def test_verl_entry_takes_choices_as_numpy_arrays() -> None:
    # Was: ValueError "truth value of an array ... is ambiguous" (`options or choices` on a parquet list).
    import numpy as np

    from e2c.rewards import compute_score

    text = "x</EXPLORATION><EXECUTION>The correct answer is Heparin.</EXECUTION>"
    out = compute_score("medqa", text, "B", {"choices": np.array(["Aspirin", "Heparin", "Warfarin"])})
    assert out["acc"] == 1.0 and out["pred"] == "B"
    assert compute_score("medqa", text, "B", {"options": {"A": "Aspirin", "B": "Heparin", "C": None}})["acc"]


# ------------------------------------------------------------------------- regressions from the review
@pytest.mark.parametrize(
    "text",
    [
        "Answer choices: A. Heparin B. Warfarin C. Aspirin D. Clopidogrel.\nAspirin inhibits COX-1.",
        "Let's analyze the options:\nA) Heparin acts on",
        "Considering the answer choices: A. Heparin",
        "The answer is (A)(B)(C)(D)",
        "The answer is A/B",
        "The answer is A or B",
        "We should select B-cell therapy",
        "Review:\nA. Heparin\nB. Warfarin",  # a restated (or truncated) option list
    ],
)
def test_option_lists_and_hedges_are_not_answers(text: str) -> None:
    # Was A (or the last listed option): list headers and hedges read as answer statements.
    assert extract_choice(text, OPTS) == (None, "none")


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("2ab", "2"),
        ("2", "2ab"),
        ("6xy", "6"),
        ("3 \\text{ million}", "3"),
        ("3 \\text{ or more}", "3"),
        ("5 minus the overlap", "5"),
        ("1000000.5", "1000000"),
        ("1000000.5", "1000001"),
        ("123456789.9", "123456789"),
        ("0", "0.000000001"),
        ("2.9999999", "3"),
    ],
)
def test_lenient_equalities_are_gone(pred: str, gold: str) -> None:
    # Were all equal: letters after a number were taken for a unit (or dropped by math-verify), and a
    # relative/absolute tolerance let non-integers match integers.
    assert not grade(f"\\boxed{{{pred}}}", gold, fmt=None, timeout=5).correct


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("5 \\text{ dollars}", "5"),
        ("1.6 \\mathrm{~cm}", "1.6"),
        ("12 square units", "12"),
        ("60 km/h", "60"),
        ("0.333333", "1/3"),
        ("3.0", "3"),
        ("50\\%", "0.5"),
        ("x=3", "3"),
        ("2^2", "4"),
    ],
)
def test_units_and_spellings_still_match(pred: str, gold: str) -> None:
    assert grade(f"\\boxed{{{pred}}}", gold, fmt=None, timeout=5).correct


def test_markdown_headings_are_not_gsm8k_answers() -> None:
    # Was "2. Solve the system" -> 2, and "Conclusion" hid the stated answer.
    assert extract_answer("#### 1. Set up\n#### 2. Solve the system\nWe get x = 7")[0] is None
    assert extract_answer("#### Conclusion\nThe final answer is 5.") == ("5", "phrase")
    assert extract_answer("so\n#### 1,000") == ("1,000", "gsm8k")


def test_prefilled_tag_written_twice_is_not_well_formed() -> None:
    text = "<EXPLORATION>1. plan</EXPLORATION><EXECUTION>\\boxed{1}</EXECUTION>"
    assert grade(text, "1", prefilled=True).chain_status == "repeated_tags"
    assert grade(text, "1", prefilled=False).chain_status == "ok"


def test_vote_grouping_cost_is_bounded() -> None:
    from e2c.rewards.vote import answer_classes

    towers = ["2^{2^{2^{2^{2^{2^{2^{2}}}}}}}", "10^{10^{10^{10^{10}}}}", "((10^{100})!)!", "(x+1)^{100000}"]
    t = time.perf_counter()
    classes = answer_classes([*towers, "3", "3.0"], [False] * 6)
    assert time.perf_counter() - t < 10.0  # two timed-out checks, then the in-process path only
    assert classes[4] == classes[5] and len(set(classes[:4])) == 4


def test_verl_entry_reports_unreadable_references() -> None:
    from e2c.rewards import compute_score

    out = compute_score("gsm8k", "x</EXPLORATION><EXECUTION>\\boxed{2}</EXECUTION>", "")
    assert out["score"] == 0.0 and out["unparseable_gold"] == 1.0 and out["error"] == 0.0


def test_plan_bonus_keeps_correct_above_wrong() -> None:
    # Was 0.0 for a correct chain whose plan has no numbered steps: the same reward as a wrong answer.
    from e2c.rewards.grader import PLAN_FLOOR

    unnumbered = "Factor, then sum the roots.</EXPLORATION><EXECUTION>(x-2)(x-3)=0, so \\boxed{5}</EXECUTION>"
    assert (
        grade(unnumbered, "5", plan_bonus=True).score
        == PLAN_FLOOR
        > grade(unnumbered, "6", plan_bonus=True).score
    )
    followed = (
        "1. Factor the quadratic.\n2. Sum the roots.</EXPLORATION><EXECUTION>Step 1: Factor the quadratic: "
        "(x-2)(x-3).\nStep 2: Sum the roots: 2+3 = \\boxed{5}</EXECUTION>"
    )
    assert grade(followed, "5", plan_bonus=True).score == 1.0
