"""The one grader: eval, RL and test-time scaling all call :func:`grade`.

It never raises on model output. Every outcome is a :class:`GradeResult` whose ``reason`` says what
happened: ``correct``, ``wrong``, ``no_answer`` (nothing extractable: counted wrong), ``timeout``
(the symbolic check ran past its bound: counted wrong), ``unparseable_gold``, ``error``.

Score (documented, used as the RL reward): 1.0 when correct, else 0.0. With ``plan_bonus`` on (the
paper's stage-2 setting) a correct answer scores ``PLAN_FLOOR + (1 - PLAN_FLOOR) * adherence``, so a correct
chain whose execution ignores its plan earns less. Departure from the paper, whose correct answer scores
the bare adherence: there a correct chain with an unnumbered plan (adherence 0) scored the same 0 as a
wrong one, so stage 2 could not tell right from wrong on such chains; with the floor a correct answer
always beats a wrong one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from e2c.chain import E2C, ChainFormat, ParsedChain

# Every rule that depends on the answer kind lives in its entry of the table of kinds; the names and the
# answer-length bound stay importable from here.
from e2c.rewards.kinds import (  # noqa: F401
    DEFAULT_KIND,
    KINDS,
    MAX_ANSWER_CHARS,
    AnswerKind,
    Kind,
    get_kind,
)
from e2c.rewards.math_equiv import DEFAULT_TIMEOUT
from e2c.rewards.mcq import LETTERS
from e2c.rewards.plan import plan_adherence
from e2c.sandbox import Sandbox, given_or_env

# A check's "how" that is also the result's reason (not a plain "wrong"): the grader could not decide.
UNDECIDED = ("timeout", "error", "unparseable_gold")


@dataclass(frozen=True)
class GradeResult:
    """The outcome of grading one response."""

    score: float
    correct: bool
    extracted: str | None
    gold: str | None
    reason: str
    kind: str
    method: str = "none"  # how the answer was found: boxed, gsm8k, phrase, number, bare, ...
    check: str = ""  # how equality was decided: string, numeric, symbolic, letter, ...
    chain_status: str = "unparsed"
    format_score: float = 0.0
    plan_adherence: float | None = None
    # A kind that runs programs (code): tests passed and run, and the sandbox's wall seconds.
    tests_passed: int | None = None
    tests_total: int | None = None
    sandbox_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def format_score(parsed: ParsedChain, has_answer: bool) -> float:
    """Half for a well-formed chain (both phases, each tag once, in order, closed), half for an
    extractable final answer in the execution. 1.0 only when both hold."""
    return 0.5 * float(parsed.well_formed) + 0.5 * float(has_answer and parsed.has_execution)


PLAN_FLOOR = 0.5


def as_options(options: Any) -> dict[str, str] | None:
    """MCQ options as ``{letter: text}`` from a mapping, or from a list of choice texts (also a numpy
    array, as parquet columns arrive in verl's ``extra_info``); None for anything else."""
    if isinstance(options, Mapping):
        # Parquet struct columns give every key of the schema, None where a row has no such option.
        return {str(k): str(v) for k, v in options.items() if v is not None} or None
    if hasattr(options, "tolist"):
        options = options.tolist()
    if isinstance(options, (list, tuple)) and 0 < len(options) <= len(LETTERS):
        return {LETTERS[i]: str(c) for i, c in enumerate(options)}
    return None


def grade(
    response: Any,
    gold: Any,
    kind: Kind = DEFAULT_KIND,
    *,
    options: Any = None,
    fmt: ChainFormat | None = E2C,
    plan_bonus: bool = False,
    fallback_number: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    prefilled: bool | None = None,
    stop_on_fail: bool = False,
    sandbox: Sandbox | None = None,
) -> GradeResult:
    r"""Grade one response against a reference answer.

    Args:
        response: model output (the continuation after the prefilled tag, or a full tagged text).
        gold: reference answer: a string, number, list, GSM8K solution or boxed solution (math); a letter,
            index or option text (mcq).
        kind: a name in :data:`e2c.rewards.kinds.ANSWER_KINDS`: ``math``, ``mcq``, ``countdown`` (gold
            ``{"target", "numbers"}``; the boxed expression must use each number once and equal the target)
            or ``code`` (gold: the tests, :mod:`e2c.rewards.code_tests`; the last fenced program runs on them
            in the sandbox, :mod:`e2c.sandbox`).
        options: the MCQ options ``{"A": text, ...}`` or a list of choice texts (lets option text count as
            an answer).
        fmt: the chain format to parse; ``None`` grades the raw text with no chain parsing.
        plan_bonus: scale a correct answer's score by its plan adherence, from ``PLAN_FLOOR`` (no plan step
            carried out) to 1.0 (every step; the stage-2 reward).
        fallback_number: accept the last number of the text when no explicit answer is found (for
            grading reference solutions; off for model output).
        timeout: hard bound, in seconds, on the symbolic check.
        stop_on_fail: a kind that runs programs stops at the first failing test (an all-or-nothing reward
            needs no more; ``tests_passed`` is then a lower bound).
        sandbox: where a kind that runs programs runs them: the command's own (:func:`e2c.sandbox.use`);
            None: the one ``$E2C_SANDBOX`` names (:func:`e2c.sandbox.from_env`, built when first needed).
        prefilled: the response continues a prefilled opening tag (``True``: a response that starts with
            the tag again has it twice and is not well formed), or not (``False``); ``None`` infers it.

    The answer is read from :attr:`e2c.chain.ParsedChain.answer_region`: the execution whenever the
    chain has one, else the text after a closed exploration, else the whole text. Never raises on model
    output (an unexpected failure is the result ``reason="error"``); an unknown ``kind`` is a caller
    bug and raises ``ValueError``.

    >>> r = grade("I need a plan.</EXPLORATION><EXECUTION>So 2 + 3 = \\boxed{5}</EXECUTION>", "5")
    >>> r.correct, r.score, r.extracted, r.chain_status, r.format_score
    (True, 1.0, '5', 'ok', 1.0)
    >>> grade("<EXPLORATION>p</EXPLORATION><EXECUTION>\\boxed{0.5}</EXECUTION>", "\\frac{1}{2}").check
    'numeric'
    >>> grade("The answer is (B).", "B", "mcq", options=["3", "4"]).correct
    True
    >>> grade("\\boxed{6}", "5").reason
    'wrong'
    """
    spec = get_kind(kind)  # outside the try: an unknown kind is the caller's bug, not a sample's
    try:
        return _grade(
            response,
            gold,
            spec,
            options,
            fmt,
            plan_bonus,
            fallback_number,
            timeout,
            prefilled,
            stop_on_fail,
            sandbox,
        )
    except Exception as e:  # a grader bug must cost one sample, never a file or an RL step
        return GradeResult(
            score=0.0,
            correct=False,
            extracted=None,
            gold=None,
            reason="error",
            kind=kind,
            check=f"{type(e).__name__}: {str(e)[:200]}",
        )


def _grade(
    response: Any,
    gold: Any,
    spec: AnswerKind,
    options: Mapping[str, str] | None,
    fmt: ChainFormat | None,
    plan_bonus: bool,
    fallback_number: bool,
    timeout: float,
    prefilled: bool | None = None,
    stop_on_fail: bool = False,
    sandbox: Sandbox | None = None,
) -> GradeResult:
    if not isinstance(response, str):
        response = "" if response is None else str(response)
    options = as_options(options)
    parsed = fmt.parse(response, prefilled) if fmt is not None else None
    region = parsed.answer_region if parsed is not None else response
    status = parsed.status if parsed is not None else "unparsed"

    gold_s = spec.reference(gold, options)
    pred, method = spec.extract(region, options, fallback_number)
    checked = (
        spec.check(pred, gold_s, timeout, stop_on_fail, lambda: given_or_env(sandbox))
        if spec.runs_programs
        else spec.check(pred, gold_s, timeout)
    )
    correct, check = checked[0], checked[1]
    verdict = checked[2] if len(checked) > 2 else None  # a program's run (code): tests and seconds
    # No kind's check may call a missing answer or an unreadable reference correct.
    correct = correct and gold_s is not None and pred is not None
    reason = _reason(correct, check, gold_s, pred)

    fscore = format_score(parsed, pred is not None) if parsed is not None else 0.0
    adherence = None
    score = 1.0 if correct else 0.0
    if parsed is not None:
        adherence = plan_adherence(parsed.exploration, parsed.execution)
        if plan_bonus and correct:
            score = PLAN_FLOOR + (1.0 - PLAN_FLOOR) * adherence
    return GradeResult(
        score=score,
        correct=correct,
        extracted=pred,
        gold=gold_s,
        reason=reason,
        kind=spec.name,
        method=method,
        check=check,
        chain_status=status,
        format_score=fscore,
        plan_adherence=adherence,
        tests_passed=verdict.passed if verdict is not None else None,
        tests_total=verdict.total if verdict is not None else None,
        sandbox_s=round(verdict.seconds, 4) if verdict is not None else None,
    )


def _reason(correct: bool, check: str, gold: str | None, pred: str | None) -> str:
    """The result's reason, the same for every kind: an unreadable reference first, then a missing answer,
    then the check's verdict (an undecided check keeps its own word)."""
    if gold is None:
        return "unparseable_gold"
    if pred is None:
        return "no_answer"
    if correct:
        return "correct"
    return check if check in UNDECIDED else "wrong"


def grade_many(
    responses: Sequence[str],
    golds: Sequence[Any],
    kind: Kind = DEFAULT_KIND,
    *,
    options: Sequence[Mapping[str, str] | None] | None = None,
    workers: int = 4,
    **kwargs: Any,
) -> list[GradeResult]:
    """:func:`grade` over many responses; symbolic checks run concurrently on the verification pool."""
    if len(responses) != len(golds):
        raise ValueError(f"{len(responses)} responses but {len(golds)} references")
    opts = list(options) if options is not None else [None] * len(responses)

    def one(i: int) -> GradeResult:
        return grade(responses[i], golds[i], kind, options=opts[i], **kwargs)

    if workers <= 1 or len(responses) <= 1:
        return [one(i) for i in range(len(responses))]
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(one, range(len(responses))))
