"""Answer classes for voting: which extracted answers say the same thing.

maj@k and every voting test-time-scaling method group all answers, right or wrong, by the grader's own
equivalence (grouping only the correct ones would split the wrong vote and bias maj@k upward): correct answers
form one class; a wrong answer joins the first earlier class whose representative the grader finds equal, else
starts one; an answer-less sample does not vote. Programs are grouped by their behaviour on the public tests
(:func:`program_key`, :func:`behaviour_classes`), never on hidden tests. Cost is bounded: equal normalised
strings merge unchecked, each pair is checked once per process, symbolic checks time out at 1 s, and after
``max_checks`` checks or two timeouts per call the rest use the fast path only.
More: docs/generation-and-evaluation.md, "Evaluation".
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from e2c.rewards.kinds import DEFAULT_KIND, Kind, find_kind, text_canon
from e2c.rewards.math_equiv import math_equal, quick_equal

CORRECT = 0
"""The class id shared by every correct answer."""

VOTE_CHECK_TIMEOUT = 1.0
MAX_CHECKS = 256
MAX_TIMEOUTS = 2  # after this many timed-out checks in one call, the rest is grouped by string only


@lru_cache(maxsize=65536)
def _same_math(a: str, b: str, timeout: float) -> tuple[bool, bool]:
    """(equal, a check timed out). Equivalence is meant to be symmetric; math-verify is not always, so
    either direction counts."""
    ok, how = math_equal(a, b, timeout=timeout)
    if ok or how == "timeout":
        return ok, how == "timeout"
    ok2, how2 = math_equal(b, a, timeout=timeout)
    return ok2, how2 == "timeout"


def _quick(a: str, b: str) -> bool | None:
    try:
        return quick_equal(a, b)
    except Exception:
        return None


def _canon(answer: str, kind: str) -> str:
    """The kind's canonical spelling; an unknown kind's is the normalised text."""
    spec = find_kind(kind)
    return spec.canon(answer) if spec is not None else text_canon(answer)


def answer_classes(
    answers: Sequence[str | None],
    corrects: Sequence[bool],
    kind: Kind = DEFAULT_KIND,
    *,
    timeout: float = VOTE_CHECK_TIMEOUT,
    max_checks: int = MAX_CHECKS,
) -> list[int | None]:
    """Class id of each sample's answer (:data:`CORRECT` for every correct one, ``None`` for none).

    Args:
        answers: the extracted answers, in sample order (``None`` or blank: no answer).
        corrects: whether each sample was graded correct.
        kind: a name of :mod:`e2c.rewards.kinds`, whose ``canon`` spells the answers and whose
            ``symbolic`` asks for the grader's equivalence: ``math`` (grader equivalence), ``mcq``
            (letters) or ``countdown`` (normalised text: two different wrong expressions are different
            answers even when their values agree).
        timeout: bound on each symbolic check, seconds.
        max_checks: most equivalence checks in one call; beyond it, string equality only.

    Ids are small integers in order of first appearance (wrong classes start at 1).
    """
    if len(answers) != len(corrects):
        raise ValueError(f"{len(answers)} answers but {len(corrects)} correctness flags")
    out: list[int | None] = []
    reps: list[tuple[str, str]] = []  # (answer, canonical) of each wrong class, class id = index + 1
    by_canon: dict[str, int] = {}
    checks = timeouts = 0
    spec = find_kind(kind)
    symbolic = spec is not None and spec.symbolic
    for ans, ok in zip(answers, corrects, strict=True):
        if ok:
            out.append(CORRECT)
            continue
        if ans is None or not str(ans).strip():
            out.append(None)
            continue
        a = str(ans)
        c = _canon(a, kind)
        if c in by_canon:
            out.append(by_canon[c])
            continue
        found = None
        if symbolic:
            # The in-process fast path first (bounded, no worker), then symbolic checks while in budget.
            found = next((i + 1 for i, (rep, _) in enumerate(reps) if _quick(a, rep)), None)
            for i, (rep, _) in enumerate(reps):
                if found is not None or checks >= max_checks or timeouts >= MAX_TIMEOUTS:
                    break
                if _quick(a, rep) is False:
                    continue
                checks += 1
                same, timed_out = _same_math(a, rep, timeout)
                timeouts += timed_out
                if same:
                    found = i + 1
        if found is None:
            reps.append((a, c))
            found = len(reps)
        by_canon[c] = found
        out.append(found)
    return out


def majority_class(classes: Sequence[int | None], weights: Sequence[float] | None = None) -> int | None:
    """The class with the largest total weight (default 1 per sample); ties go to the class seen first;
    ``None`` when no sample has an answer."""
    w = list(weights) if weights is not None else [1.0] * len(classes)
    totals: dict[int, float] = {}
    for c, x in zip(classes, w, strict=True):
        if c is not None:
            totals[c] = totals.get(c, 0.0) + x
    if not totals:
        return None
    best = max(totals.values())
    return next(c for c in totals if totals[c] == best)  # dicts keep first-appearance order


# ---------------------------------------------------------------------------------------------- programs
# Programs (the ``code`` kind) vote by what they do, not how they are written: test-time search runs each
# candidate on the problem's public tests only (e2c.tts) and programs with equal behaviour vote together.
# The grader's correctness never enters (it would need the hidden tests).
ProgramKey = tuple[str, ...]


def program_key(program: str | None, behaviour: Sequence[str] | None) -> ProgramKey | None:
    """The vote key of one program: ``None`` (no program: no vote); ``("run", *behaviour)`` when it ran
    on the public tests (``behaviour``: :attr:`e2c.rewards.code_judge.CodeVerdict.behaviour`, one key per
    test, equal keys for equal outputs); otherwise (no public tests, a program too long to run, a sandbox
    failure: ``behaviour`` None) ``("text", canonical text)``, whitespace folded as the ``code`` kind's
    ``canon`` folds it. The two tags never collide, so a program that could not run votes by its text alone.

    >>> program_key("print(1)", ("a1", "b2")), program_key("print(1)  \\n", None), program_key(None, ("a1",))
    (('run', 'a1', 'b2'), ('text', 'print(1)'), None)
    """
    if program is None or not str(program).strip():
        return None
    if behaviour is not None:
        return ("run", *behaviour)
    return ("text", _canon(str(program), "code"))


def behaviour_classes(keys: Sequence[ProgramKey | None]) -> list[int | None]:
    """Class id of each program's vote key (:func:`program_key`): equal keys share an id, ids are 0, 1, ...
    in order of first appearance, and ``None`` (no program) is in no class. Linear in the number of
    programs (a dict of the keys seen); :func:`majority_class` then counts the votes.

    >>> behaviour_classes([("run", "x"), None, ("run", "y"), ("run", "x")])
    [0, None, 1, 0]
    """
    ids: dict[ProgramKey, int] = {}
    out: list[int | None] = []
    for k in keys:
        out.append(None if k is None else ids.setdefault(k, len(ids)))
    return out
