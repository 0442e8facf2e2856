"""Mathematical equivalence of two answer strings.

:func:`quick_equal` is in-process and bounded (normalised strings, exact numbers, thousands separators,
fractions, percents): it settles most cases in microseconds and cannot hang. Symbolic answers (sets,
intervals, matrices, expressions) go to math-verify in a :class:`HardTimeoutPool` worker, cut at the bound
whatever thread or process calls. Covered where math-verify alone falls short: ``50\\%`` against ``0.5``
(percent values compared both ways), ``1,000`` as a thousands separator (``2,3`` stays a set), and its
timeouts, which raise off the main thread.
More: docs/chain-format-and-grader.md, "The grader".
"""

from __future__ import annotations

import os
import re
import threading
from decimal import Decimal, InvalidOperation, localcontext
from fractions import Fraction

from e2c.rewards.pool import CallError, CallTimeout, HardTimeoutPool

DEFAULT_TIMEOUT = float(os.environ.get("E2C_GRADER_TIMEOUT", "5"))

_STRIP_CMDS = re.compile(r"\\(?:left|right|displaystyle|!|,|;|:|quad|qquad)(?![a-zA-Z])")
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mathbf|operatorname)\{([^{}]*)\}")
_DEGREE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree")
_ASSIGN = re.compile(r"^[a-zA-Z]\s*=\s*(?!=)(.+)$")
# A unit after a number: one or two words, set off by a space (or by \text{}/\mathrm{}), e.g. "5 dollars",
# "1.6 \mathrm{~cm}", "12 square units". Glued letters ("2ab", "2pi") are algebra, not units, and words
# that change the value or hedge ("3 million", "3 or more", "5 minus ...") are never a unit.
_UNIT_TAIL = re.compile(r"^(-?[\d.,/]+)\s+([a-zA-Z]{2,}(?:/[a-zA-Z]+)?(?:\s+[a-zA-Z]{2,})?)\s*\.?$")
_NOT_UNITS = frozenset(
    "million millions billion billions trillion thousand thousands hundred hundreds dozen dozens percent "
    "times more less fewer minus plus or and to than over per of squared cubed pi".split()
)
_UNIT_WRAP = re.compile(r"\\(?:text|mathrm|textrm|mbox)\{([^{}]*)\}")


def strip_unit(s: str) -> str:
    """``s`` without a trailing unit (see the rule above); unchanged when there is none."""
    t = _UNIT_WRAP.sub(r" \1", str(s)).replace("~", " ").replace("\\,", " ").replace("\\ ", " ")
    t = t.replace("\\$", "").replace("$", "").strip()
    m = _UNIT_TAIL.match(t)
    if not m or any(w.lower() in _NOT_UNITS for w in re.split(r"[\s/]+", m.group(2))):
        return s
    return m.group(1)


def normalize(s: str) -> str:
    """A canonical string for cheap comparison: no ``$``, spacing commands, ``\\left``/``\\right``,
    ``\\text{}`` wrappers, degree marks, trailing period, ``x =`` prefix, or whitespace."""
    s = str(s).strip()
    s = s.replace("\\$", "").replace("$", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _STRIP_CMDS.sub("", s)
    s = _DEGREE.sub("", s)
    for _ in range(3):
        s2 = _TEXT_WRAP.sub(r"\1", s)
        if s2 == s:
            break
        s = s2
    s = s.strip().rstrip(".").strip()
    m = _ASSIGN.match(s)
    if m:
        s = m.group(1).strip()
    s = re.sub(r"\s+", "", s)
    if re.fullmatch(r"[A-Za-z]{2,}", s):
        s = s.lower()
    return s


_INT_SEP = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_PLAIN = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_SLASH = re.compile(r"^(-?\d+)/(\d+)$")
_FRAC = re.compile(r"^(-?)\\frac\{?(-?\d+)\}?\{?(\d+)\}?$")


# Literals past these bounds are not expanded into exact fractions: ``Fraction("1e-999999999")`` would
# build a billion-digit integer. They are compared as decimals instead (exact, no expansion).
MAX_EXPONENT = 1000
MAX_DIGITS = 4000
_EXP = re.compile(r"[eE]([-+]?\d+)$")


def _too_large(s: str) -> bool:
    m = _EXP.search(s)
    if m and abs(int(m.group(1)[:8])) > MAX_EXPONENT:
        return True
    return len(s) > MAX_DIGITS


def to_number(s: str) -> tuple[Fraction, bool] | None:
    """Parse a plain number: ``12``, ``-3.5``, ``1,000``, ``3/4``, ``\\frac{3}{4}``, ``50\\%``, ``5 cm``.

    Returns ``(value, is_percent)`` with ``value`` exact, or None for anything else (including literals
    too large to expand: see :func:`huge_literal`).
    """
    s = _plain_number_text(s)
    if s is None:
        return None
    s, percent = s
    if _too_large(s):
        return None
    try:
        if _PLAIN.match(s):
            return Fraction(s), percent
        m = _SLASH.match(s)
        if m and int(m.group(2)) != 0:
            return Fraction(int(m.group(1)), int(m.group(2))), percent
        m = _FRAC.match(s)
        if m and int(m.group(3)) != 0:
            v = Fraction(int(m.group(2)), int(m.group(3)))
            return (-v if m.group(1) else v), percent
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return None


def _plain_number_text(s: str) -> tuple[str, bool] | None:
    """The numeric text of a plain number answer (units, percent sign, separators removed)."""
    s = normalize(strip_unit(s))
    percent = False
    if s.endswith("\\%") or s.endswith("%"):
        percent = True
        s = s[:-2] if s.endswith("\\%") else s[:-1]
    if s.startswith("(") and s.endswith(")") and _PLAIN.match(s[1:-1]):
        s = s[1:-1]  # "(073)", as AIME solutions box it
    if _INT_SEP.match(s):
        s = s.replace(",", "")
    return s, percent


def huge_literal(s: str) -> Decimal | None:
    """A decimal literal too large for :func:`to_number` (``1e5000000``, 5,000 digits), as a Decimal;
    None for anything else."""
    got = _plain_number_text(s)
    if got is None or got[1] or not _too_large(got[0]) or not _PLAIN.match(got[0]):
        return None
    try:
        return Decimal(got[0])
    except (InvalidOperation, ValueError):
        return None


_REL_TOL = Fraction(1, 10**6)


def _close(a: Fraction, b: Fraction) -> bool:
    """Equal; or, when neither is an integer, within a relative 1e-6 (``0.333333`` for ``1/3``), computed
    exactly (no float conversion, which overflows on huge values). An integer matches only itself:
    ``1000000.5`` is not ``1000000``, and ``0.000000001`` is not ``0``."""
    if a == b:
        return True
    if a.denominator == 1 or b.denominator == 1:
        return False
    return abs(a - b) <= _REL_TOL * max(abs(a), abs(b))


def _quick_decide(pred: str, gold: str) -> tuple[bool, str] | None:
    """:func:`quick_equal` with how it was decided (``string`` or ``numeric``)."""
    if normalize(pred) == normalize(gold):
        return True, "string"
    a, b = to_number(pred), to_number(gold)
    other = pred if a is None else gold
    if (a is None) != (b is None) and huge_literal(other) is None and _free_letters(other):
        # A number against an answer with a variable or words in it ("2ab", "3 or more", "3 million"):
        # math-verify drops such letters and would call them equal.
        return False, "numeric"
    if a is None or b is None:
        ha, hb = huge_literal(pred), huge_literal(gold)
        if ha is not None or hb is not None:
            # At least one side is a number too large to expand: equal only as exact decimals.
            va = ha if ha is not None else (_as_decimal(a[0]) if a and not a[1] else None)
            vb = hb if hb is not None else (_as_decimal(b[0]) if b and not b[1] else None)
            if va is not None and vb is not None:
                return va == vb, "numeric"
            if (ha is not None and b is not None) or (hb is not None and a is not None):
                return False, "numeric"
        return None
    (va, pa), (vb, pb) = a, b
    if pa == pb:
        return _close(va, vb), "numeric"
    # One side is a percent: "50%" equals both "0.5" and "50".
    pct, other = (va, vb) if pa else (vb, va)
    return _close(pct / 100, other) or _close(pct, other), "numeric"


_FREE_LETTERS = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]+")


def _free_letters(s: str) -> bool:
    """Whether ``s`` (after the unit rule) has letters that are not part of a LaTeX command."""
    try:
        t = normalize(strip_unit(s))
    except Exception:
        return False
    return bool(_FREE_LETTERS.search(t))


def _as_decimal(v: Fraction) -> Decimal | None:
    """A Fraction with a terminating decimal expansion as an exact Decimal, else None."""
    d = v.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d != 1:
        return None
    with localcontext() as ctx:
        ctx.prec = MAX_DIGITS * 2
        return Decimal(v.numerator) / Decimal(v.denominator)


def quick_equal(pred: str, gold: str) -> bool | None:
    """Cheap, bounded comparison. True/False when decided; None when symbolic checking is needed."""
    decided = _quick_decide(pred, gold)
    return None if decided is None else decided[0]


def _wrap(s: str) -> str:
    return "\\boxed{" + normalize_for_parse(s) + "}"


def normalize_for_parse(s: str) -> str:
    """Light clean-up before math-verify: dollars and display spacing only (structure kept)."""
    s = str(s).strip().replace("\\$", "")
    if s.startswith("$") and s.endswith("$"):
        s = s.strip("$")
    return s.strip().rstrip(".")


def verify_symbolic(pred: str, gold: str, inner_timeout: int | None = 5) -> bool | str | None:
    """math-verify on two answer strings, in the calling process.

    Returns True/False, None when the gold cannot be parsed, or ``"timeout"`` when math-verify's own
    limit fired. ``inner_timeout`` is that signal-based limit; it only works on the main thread, so it is
    dropped elsewhere (the pool's hard limit is the real guard).
    """
    import logging

    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    # Its warnings would repeat what the returned value already says.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    if threading.current_thread() is not threading.main_thread():
        inner_timeout = None
    try:
        try:
            g = parse(_wrap(gold), parsing_timeout=inner_timeout, raise_on_error=True)
        except Exception:
            g = []
        if not g:
            return None
        try:
            p = parse(_wrap(pred), parsing_timeout=inner_timeout, raise_on_error=True)
        except Exception:
            return False
        if not p:
            return False
        try:
            return bool(verify(g, p, timeout_seconds=inner_timeout, raise_on_error=True))
        except Exception:
            return False
    except TimeoutException:
        return "timeout"


_POOL: HardTimeoutPool | None = None
_POOL_LOCK = threading.Lock()


def default_pool() -> HardTimeoutPool:
    """The process-wide verification pool (created on first use, again after a fork).

    Size from ``E2C_GRADER_WORKERS`` (default: min(4, CPUs)).
    """
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._pid != os.getpid():
            n = int(os.environ.get("E2C_GRADER_WORKERS", min(4, os.cpu_count() or 1)))
            _POOL = HardTimeoutPool("e2c.rewards.math_equiv:verify_symbolic", workers=n)
        return _POOL


def _inner(timeout: float) -> int | None:
    return max(1, int(timeout) - 1) if timeout >= 2 else None


def math_equal(
    pred: str | None, gold: str | None, timeout: float = DEFAULT_TIMEOUT, pool: HardTimeoutPool | None = None
) -> tuple[bool, str]:
    """Whether ``pred`` is mathematically equal to ``gold``, never taking longer than ``timeout`` s
    (plus a worker start the first time).

    Returns ``(equal, how)`` where ``how`` is ``string``/``numeric`` (decided in-process), ``symbolic``
    (math-verify), ``timeout``, ``unparseable_gold``, ``error`` or ``empty``.
    """
    if pred is None or gold is None or not str(pred).strip() or not str(gold).strip():
        return False, "empty"
    decided = _quick_decide(pred, gold)
    if decided is not None:
        return decided
    pool = pool or default_pool()
    out = pool.call((pred, gold, _inner(timeout)), timeout)
    if isinstance(out, CallTimeout):
        return False, "timeout"
    if isinstance(out, CallError):
        return False, "error"
    if out is None:
        return False, "unparseable_gold"
    if out == "timeout":
        return False, "timeout"
    return bool(out), "symbolic"
