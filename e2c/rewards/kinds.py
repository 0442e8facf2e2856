"""The table of answer kinds: every rule that depends on what an answer is lives in one entry here.

An :class:`AnswerKind` says how to read the reference, find and compare an answer, spell it for votes, and what
the data layer needs. Everything that branches on the kind is derived from :data:`ANSWER_KINDS`, read when code
runs (not copied at import): a kind is one entry, and a test can add one with ``monkeypatch.setitem``.
More: docs/extending.md, "Answer kinds".

>>> sorted(ANSWER_KINDS)
['code', 'countdown', 'math', 'mcq']
>>> MCQ.extract("The answer is (B).", None, False), MCQ.reference(1, None), MCQ.check("B", "B", 5.0)
(('B', 'phrase'), 'B', (True, 'letter'))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from e2c.chain import ChainFormat
from e2c.rewards.countdown import check as countdown_check
from e2c.rewards.countdown import parse_reference as countdown_reference
from e2c.rewards.extract import extract_answer, reference_answer
from e2c.rewards.math_equiv import math_equal, normalize
from e2c.rewards.mcq import LETTERS, extract_choice, reference_choice

Kind: TypeAlias = str
"""The name of an entry of :data:`ANSWER_KINDS` (checked when used, not by the type checker: a
``Literal`` would be a second list of the names to keep in step)."""

Options: TypeAlias = Mapping[str, str] | None

# Longest extracted answer that is compared; a longer "answer" is counted wrong without a check.
MAX_ANSWER_CHARS = 2000


@dataclass(frozen=True)
class AnswerKind:
    """One kind of answer and every rule that depends on it.

    Attributes:
        name: the kind's name (``kind`` of a record, ``extra_info.kind`` of an RL row, ``--kind``).
        summary: one line for help texts: what the answer and its reference are.
        reference: ``(gold, options) -> reference`` as a string, or None when the gold cannot be read
            (graded ``unparseable_gold``). The string is what :class:`~e2c.rewards.grader.GradeResult`
            reports as ``gold`` and what ``check`` receives.
        extract: ``(answer region, options, fallback_number) -> (answer or None, method)``; never raises
            on model output.
        check: ``(answer, reference, timeout) -> (correct, how)`` (a kind that runs programs also takes
            ``stop_on_fail`` and the sandbox, as a function called only when a program runs); called even
            when either side is None,
            so a kind can report why (its ``how`` is :class:`GradeResult`'s ``check``). A ``how`` of
            ``timeout``, ``error`` or ``unparseable_gold`` becomes the result's reason.
        canon: an answer's canonical spelling: equal spellings are the same vote.
        symbolic: different spellings may still be equal (math): voting groups wrong answers with the
            grader's symbolic equivalence, not only by ``canon``.
        answer_keys: source fields holding the reference, tried after a dataset's own.
        gold_keys: keys of a reference given as a mapping (the release's medical ``{"answer_idx": ...}``),
            in order; empty: a mapping is not unwrapped.
        options: answers are option letters: a record needs at least two options and its reference must
            be one of their letters; the question shows the options.
        object_gold: a reference may be a JSON object (not only a string, a number or a list of them).
        prompt_suffix: what the prompt asks for instead of the chain format's own suffix (a boxed answer);
            None keeps the format's.
        runs_programs: its check runs the answer in the sandbox (:mod:`e2c.sandbox`): callers bound their
            concurrency and report sandbox seconds; the check may return a third element, the
            :class:`~e2c.rewards.code_judge.CodeVerdict`.
    """

    name: str
    summary: str
    reference: Callable[[Any, Options], str | None]
    extract: Callable[[str, Options, bool], tuple[str | None, str]]
    check: Callable[..., tuple[Any, ...]]
    canon: Callable[[str], str]
    symbolic: bool = False
    answer_keys: tuple[str, ...] = ("answer",)
    gold_keys: tuple[str, ...] = ()
    options: bool = False
    object_gold: bool = False
    prompt_suffix: str | None = None
    runs_programs: bool = False


# ---------------------------------------------------------------------------------------------- math
def _math_reference(gold: Any, options: Options) -> str | None:
    return reference_answer(gold)


def _math_extract(region: str, options: Options, fallback_number: bool) -> tuple[str | None, str]:
    return extract_answer(region, fallback_number)


def _math_check(pred: str | None, ref: str | None, timeout: float) -> tuple[bool, str]:
    """math-verify equivalence under a hard timeout; an over-long answer is wrong without a check (a
    megabyte "answer" would only cost the symbolic check its whole bound)."""
    if pred is None or ref is None:
        return False, ""
    if len(pred) > MAX_ANSWER_CHARS:
        return False, "too_long"
    return math_equal(pred, ref, timeout=timeout)


def text_canon(answer: str) -> str:
    """The normalised text of an answer (math-verify's normalisation; whitespace-folded if that fails)."""
    try:
        return normalize(answer)
    except Exception:  # normalisation is a regex pass; a failure must not lose the vote
        return " ".join(answer.split())


# ----------------------------------------------------------------------------------------------- mcq
def _mcq_extract(region: str, options: Options, fallback_number: bool) -> tuple[str | None, str]:
    return extract_choice(region, options)


def _mcq_check(pred: str | None, ref: str | None, timeout: float) -> tuple[bool, str]:
    return pred is not None and ref is not None and pred == ref, "letter"


def _letter_canon(answer: str) -> str:
    return answer.strip().upper()


# ----------------------------------------------------------------------------------------- countdown
def _countdown_reference(gold: Any, options: Options) -> str | None:
    """The reference as JSON text (a string as given), None unless it has an integer target and numbers."""
    if countdown_reference(gold) is None:
        return None
    return gold if isinstance(gold, str) else json.dumps(gold)


def _countdown_extract(region: str, options: Options, fallback_number: bool) -> tuple[str | None, str]:
    # A number alone is never a countdown expression, so the number fallback does not apply.
    return extract_answer(region)


def _countdown_check(pred: str | None, ref: str | None, timeout: float) -> tuple[bool, str]:
    return countdown_check(pred, ref)


# ---------------------------------------------------------------------------------------------- code
CODE_PROMPT_SUFFIX = (
    "\n\nPlan first, then carry the plan out. End with the complete solution as one Python program in a "
    "```python code block."
)


def _code_reference(gold: Any, options: Options) -> str | None:
    """The tests as canonical JSON text; None when they do not fit the schema (``unparseable_gold``)."""
    # start-up: the code modules bring the sandbox (and urllib); every grader process would pay for them
    from e2c.rewards.code_tests import CodeTestsError, parse_tests

    try:
        return parse_tests(gold).dumps()
    except (CodeTestsError, RecursionError):
        return None


def _code_extract(region: str, options: Options, fallback_number: bool) -> tuple[str | None, str]:
    from e2c.rewards.code_tests import extract_code  # start-up, as in _code_reference

    return extract_code(region)


def _code_check(
    pred: str | None, ref: str | None, timeout: float, stop_on_fail: bool, sandbox: Callable[[], Any]
) -> tuple[bool, str] | tuple[bool, str, Any]:
    """Run the program on every test in ``sandbox()``; ``how`` is ``tests k/n``, ``too_long`` or ``error`` (the
    sandbox failed: an error, never a wrong answer)."""
    if pred is None or ref is None:
        return False, ""
    from e2c.rewards.code_judge import judge  # start-up, as in _code_reference
    from e2c.rewards.code_tests import parse_tests

    v = judge(pred, parse_tests(ref), sandbox(), stop_on_fail=stop_on_fail)
    if v.status == "error":
        return False, "error", v
    if v.status != "ok":
        return False, v.status, v
    return v.correct, f"tests {v.passed}/{v.total}", v


def _code_canon(answer: str) -> str:
    # Programs vote by their behaviour on public tests (e2c.tts); as text, only whitespace is folded.
    return "\n".join(line.rstrip() for line in answer.strip().splitlines())


# ------------------------------------------------------------------------------------------- the table
MATH = AnswerKind(
    name="math",
    summary="a free-form answer (boxed, '####', 'the answer is'), equal to the reference by math-verify",
    reference=_math_reference,
    extract=_math_extract,
    check=_math_check,
    canon=text_canon,
    symbolic=True,
    answer_keys=(
        "answer",
        "final_answer",
        "Answer",
        "expected_answer",
        "ground_truth",
        "target",
        "solution",
        "response",
    ),
)
MCQ = AnswerKind(
    name="mcq",
    summary="an option letter; the reference is a letter, a 0-based index or an option's text",
    reference=reference_choice,
    extract=_mcq_extract,
    check=_mcq_check,
    canon=_letter_canon,
    answer_keys=("answer_idx", "cop", "answer", "Answer", "label", "target", "response"),
    gold_keys=("answer_idx", "answer", "label"),
    options=True,
)
COUNTDOWN = AnswerKind(
    name="countdown",
    summary='a boxed arithmetic expression using each of the numbers once; reference {"target", "numbers"}',
    reference=_countdown_reference,
    extract=_countdown_extract,
    check=_countdown_check,
    canon=text_canon,
    object_gold=True,
)

CODE = AnswerKind(
    name="code",
    summary="a Python program (the last fenced block); the reference is its tests (e2c.rewards.code_tests)",
    reference=_code_reference,
    extract=_code_extract,
    check=_code_check,
    canon=_code_canon,
    answer_keys=("tests", "answer", "input_output", "ground_truth"),
    object_gold=True,
    prompt_suffix=CODE_PROMPT_SUFFIX,
    runs_programs=True,
)

ANSWER_KINDS: dict[str, AnswerKind] = {k.name: k for k in (MATH, MCQ, COUNTDOWN, CODE)}
"""Every answer kind by name: the one place a kind is defined."""

DEFAULT_KIND: Kind = "math"
"""The kind of an answer nothing says otherwise about."""

KINDS: tuple[str, ...] = tuple(ANSWER_KINDS)
"""The names at import time (for ``argparse`` choices and exports; code that checks a name reads
:data:`ANSWER_KINDS` when it runs)."""


def find_kind(name: object) -> AnswerKind | None:
    """The entry of a kind name, None for anything else (also a non-string such as a list from a bad row).

    >>> find_kind("mcq").options, find_kind("essay"), find_kind(["mcq"])
    (True, None, None)
    """
    return ANSWER_KINDS.get(name) if isinstance(name, str) else None


def get_kind(name: object) -> AnswerKind:
    """The entry of a kind name; ``ValueError`` naming the valid ones for anything else (a caller bug)."""
    kind = find_kind(name)
    if kind is None:
        raise ValueError(f"unknown answer kind {name!r}; valid: {', '.join(ANSWER_KINDS)}")
    return kind


def kind_names(where: Callable[[AnswerKind], bool] = lambda k: True) -> tuple[str, ...]:
    """The names of the kinds (those ``where`` holds for), in table order, read now.

    >>> kind_names(lambda k: k.object_gold)
    ('countdown', 'code')
    """
    return tuple(n for n, k in ANSWER_KINDS.items() if where(k))


def runs_programs(kinds: Iterable[object]) -> bool:
    """Whether any of these kind names runs its answers in the sandbox (a command then builds one).

    >>> runs_programs(["math", "code"]), runs_programs(["mcq", "essay"])
    (True, False)
    """
    return any((k := find_kind(name)) is not None and k.runs_programs for name in kinds)


def prompt_format(fmt: ChainFormat, kind: Kind) -> ChainFormat:
    """``fmt`` as a problem of ``kind`` is prompted: with the kind's own suffix in place of the format's (a
    program is asked for in a fenced block, not a boxed value); unchanged for the other kinds.

    >>> from e2c.chain import E2C
    >>> prompt_format(E2C, "code").prompt_suffix == CODE_PROMPT_SUFFIX, prompt_format(E2C, "math") is E2C
    (True, True)
    """
    suffix = get_kind(kind).prompt_suffix
    return fmt if suffix is None else fmt.replace(prompt_suffix=suffix, suffix_separator="")


def option_letters(n: int) -> str:
    """The letters naming ``n`` options, ``A`` first: how an option kind's reference is spelled."""
    return LETTERS[:n]
