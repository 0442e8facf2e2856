"""The code answer kind's reference: a problem's tests in one schema for every source, and how outputs compare.

A reference is a JSON object: ``mode`` (``stdin``, ``call``, ``assert``), ``tests`` (any may be ``"public":
true``, the only tests search may run), optional ``fn_name``, ``setup``, ``time_limit``, ``compare``,
``float_tol``. :func:`outputs_equal` never raises; ``stdin`` and ``call`` expected outputs never reach the program.
More: docs/code.md, "The answer and its reference".

>>> t = parse_tests({"mode": "stdin", "tests": [{"input": "1 2", "output": "3", "public": True}]})
>>> t.mode, t.compare, t.time_limit, len(t.public)
('stdin', 'lines', 6.0, 1)
>>> outputs_equal("3 \\n4.0000001\\n", "3\\n4", "lines", 1e-6)
True
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, localcontext
from fractions import Fraction
from typing import Any

MODES = ("stdin", "call", "assert")
COMPARES = ("lines", "tokens", "exact", "json")
DEFAULT_COMPARE = {"stdin": "lines", "call": "json", "assert": "exact"}
DEFAULT_TIME_LIMIT = 6.0
MAX_TIME_LIMIT = 60.0
DEFAULT_FLOAT_TOL = 1e-6
MAX_PROGRAM_CHARS = 100_000
"""Longest program that is run: a longer answer is graded ``too_long`` without running it."""


@dataclass(frozen=True)
class CodeTest:
    """One test: ``input`` (stdin text), ``args`` (call arguments) or ``code`` (an assert), and its
    expected ``output`` (stdin text or a JSON value; None for assert tests)."""

    input: str = ""
    args: tuple[Any, ...] = ()
    code: str = ""
    output: Any = None
    public: bool = False


@dataclass(frozen=True)
class CodeTests:
    """A problem's tests, checked once where they enter (:func:`parse_tests`)."""

    mode: str
    tests: tuple[CodeTest, ...]
    fn_name: str = ""
    setup: str = ""
    time_limit: float = DEFAULT_TIME_LIMIT
    compare: str = "lines"
    float_tol: float = DEFAULT_FLOAT_TOL

    @property
    def public(self) -> tuple[CodeTest, ...]:
        """The tests a problem statement shows (what test-time search may run)."""
        return tuple(t for t in self.tests if t.public)

    def only(self, tests: Sequence[CodeTest]) -> CodeTests:
        """The same problem with other tests (the public ones, for search)."""
        return CodeTests(
            self.mode, tuple(tests), self.fn_name, self.setup, self.time_limit, self.compare, self.float_tol
        )

    def to_json(self) -> dict[str, Any]:
        """The schema's JSON object (what :func:`parse_tests` reads back)."""
        out: dict[str, Any] = {"mode": self.mode, "tests": [_test_json(self.mode, t) for t in self.tests]}
        if self.fn_name:
            out["fn_name"] = self.fn_name
        if self.setup:
            out["setup"] = self.setup
        out["time_limit"] = self.time_limit
        out["compare"] = self.compare
        if self.float_tol != DEFAULT_FLOAT_TOL:
            out["float_tol"] = self.float_tol
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False)


def _test_json(mode: str, t: CodeTest) -> dict[str, Any]:
    if mode == "stdin":
        d: dict[str, Any] = {"input": t.input, "output": t.output}
    elif mode == "call":
        d = {"args": list(t.args), "output": t.output}
    else:
        d = {"code": t.code}
    if t.public:
        d["public"] = True
    return d


class CodeTestsError(ValueError):
    """A reference that is not a valid test set; its message is one line naming the problem."""


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def parse_tests(obj: Any) -> CodeTests:
    """Check a reference against the schema above and return it as :class:`CodeTests`.

    ``obj`` is the JSON object or its text. Raises :class:`CodeTestsError` with one line naming what is wrong
    and the valid choices (no tests, a test of the wrong shape, an unknown mode or comparison rule).

    >>> parse_tests('{"mode": "call", "fn_name": "f", "tests": [{"args": [1], "output": 2}]}').compare
    'json'
    >>> parse_tests({"mode": "stdin", "tests": []})
    Traceback (most recent call last):
    ...
    e2c.rewards.code_tests.CodeTestsError: no tests (a code reference needs at least one)
    """
    if isinstance(obj, (str, bytes)):
        try:
            obj = json.loads(obj)
        except (ValueError, RecursionError) as e:
            raise CodeTestsError(f"not JSON: {str(e)[:80]}") from None
    if not isinstance(obj, Mapping):
        raise CodeTestsError(
            f"a code reference is a JSON object with mode and tests, not {type(obj).__name__}"
        )
    unknown = sorted(set(obj) - {"mode", "tests", "fn_name", "setup", "time_limit", "compare", "float_tol"})
    if unknown:
        raise CodeTestsError(
            f"unknown field {unknown[0]!r}; valid: mode, tests, fn_name, setup, time_limit, compare, float_tol"
        )
    mode = obj.get("mode")
    if mode not in MODES:
        raise CodeTestsError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
    compare = obj.get("compare", DEFAULT_COMPARE[mode])
    if compare not in COMPARES:
        raise CodeTestsError(f"unknown comparison rule {compare!r}; valid: {', '.join(COMPARES)}")
    fn_name = obj.get("fn_name") or ""
    if not isinstance(fn_name, str) or (fn_name and not _IDENT.match(fn_name)):
        raise CodeTestsError(f"fn_name must be a Python identifier, not {fn_name!r}")
    if mode == "call" and not fn_name:
        raise CodeTestsError("call tests need fn_name (the function to call)")
    setup = obj.get("setup") or ""
    if not isinstance(setup, str):
        raise CodeTestsError(f"setup must be text, not {type(setup).__name__}")
    time_limit = _number(obj.get("time_limit", DEFAULT_TIME_LIMIT), "time_limit", 0.01, MAX_TIME_LIMIT)
    float_tol = _number(obj.get("float_tol", DEFAULT_FLOAT_TOL), "float_tol", 0.0, 1.0)
    tests = obj.get("tests")
    if hasattr(tests, "tolist"):  # a parquet list column
        tests = tests.tolist()
    if not isinstance(tests, (list, tuple)):
        raise CodeTestsError(f"tests must be a list, not {type(tests).__name__}")
    if not tests:
        raise CodeTestsError("no tests (a code reference needs at least one)")
    parsed = tuple(_parse_test(mode, t, i) for i, t in enumerate(tests))
    return CodeTests(mode, parsed, fn_name, setup, time_limit, compare, float_tol)


def _number(v: Any, name: str, lo: float, hi: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= float(v) <= hi:
        raise CodeTestsError(f"{name} must be a number from {lo:g} to {hi:g}, not {v!r}")
    return float(v)


_FIELDS = {"stdin": ("input", "output"), "call": ("args", "output"), "assert": ("code",)}


def _parse_test(mode: str, t: Any, i: int) -> CodeTest:
    if not isinstance(t, Mapping):
        raise CodeTestsError(
            f"test {i} must be an object with {' and '.join(_FIELDS[mode])}, not {type(t).__name__}"
        )
    need = _FIELDS[mode]
    extra = sorted(set(t) - {*need, "public"})
    if extra or any(k not in t for k in need):
        raise CodeTestsError(
            f"test {i} of a {mode} problem has fields {sorted(t)}; it needs {', '.join(need)}"
        )
    public = t.get("public", False)
    if not isinstance(public, bool):
        raise CodeTestsError(f"test {i}: public must be true or false, not {public!r}")
    if mode == "stdin":
        if not isinstance(t["input"], str) or not isinstance(t["output"], str):
            raise CodeTestsError(f"test {i}: a stdin test's input and output are text")
        return CodeTest(input=t["input"], output=t["output"], public=public)
    if mode == "call":
        args = t["args"]
        if hasattr(args, "tolist"):
            args = args.tolist()
        if not isinstance(args, (list, tuple)):
            raise CodeTestsError(f"test {i}: args is the list of arguments, not {type(args).__name__}")
        return CodeTest(args=tuple(args), output=t["output"], public=public)
    if not isinstance(t["code"], str) or not t["code"].strip():
        raise CodeTestsError(f"test {i}: an assert test's code is non-empty text")
    return CodeTest(code=t["code"], public=public)


# ------------------------------------------------------------------------------------------- comparing
# Every comparison is total: a program's output never makes it raise (a huge exponent, a non-finite value,
# an int too large for a float), and a non-finite value never matches a finite one.
#
# Decimal arithmetic of tokens runs in a context with the widest exponents and no traps: a difference
# that overflows is Infinity (a mismatch), never ``decimal.Overflow``. Tokens are at most 100 characters,
# so 250 digits hold every difference of two of them exactly unless their exponents are far apart, and
# then the difference is far above any tolerance.
_DEC = Context(prec=250, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[])
MAX_NUMBER_CHARS = 100


def _num(tok: str) -> Decimal | None:
    if len(tok) > MAX_NUMBER_CHARS:  # a huge literal is compared as text
        return None
    try:
        d = Decimal(tok)
    except (ArithmeticError, ValueError):
        return None
    return d if d.is_finite() else None


def _decimals_close(x: Decimal, y: Decimal, tol: float) -> bool:
    if x == y:
        return True
    with localcontext(_DEC):
        diff = abs(x - y)
        if not diff.is_finite():
            return False
        t = Decimal(tol)
        return diff <= t or diff <= t * max(abs(x), abs(y))


def _tokens_equal(a: Sequence[str], b: Sequence[str], tol: float) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        dx, dy = _num(x), _num(y)
        if dx is None or dy is None or not _decimals_close(dx, dy, tol):
            return False
    return True


def outputs_equal(got: str, want: str, rule: str, tol: float = DEFAULT_FLOAT_TOL) -> bool:
    """Whether a program's standard output ``got`` matches the expected ``want`` under ``rule`` (``lines``,
    ``tokens`` or ``exact``; see the module's text). Pure, total (never raises on any text) and linear in
    the sizes. A token matches another as text, or as a finite number within ``tol``: ``inf`` and ``nan``
    only match themselves, as text.

    >>> outputs_equal("1 2\\n", "1  2", "lines", 0.0), outputs_equal("1\\n2", "1 2", "tokens", 0.0)
    (True, True)
    >>> outputs_equal("1\\n2", "1 2", "lines", 0.0), outputs_equal("ab ", "ab", "exact", 0.0)
    (False, True)
    >>> outputs_equal("1e1000000", "2.5", "tokens", 1e-6), outputs_equal("inf", "5", "tokens", 1e-6)
    (False, False)
    """
    if rule == "exact":
        return got.rstrip() == want.rstrip()
    if rule == "tokens":
        return _tokens_equal(got.split(), want.split(), tol)
    gl, wl = got.strip().splitlines(), want.strip().splitlines()
    if len(gl) != len(wl):
        return False
    return all(g.strip() == w.strip() or _tokens_equal(g.split(), w.split(), tol) for g, w in zip(gl, wl))


def numbers_close(got: int | float, want: int | float, tol: float) -> bool:
    """Whether a returned number matches the expected one: two ints exactly; otherwise within ``tol``,
    absolute or relative, computed exactly (a float against ``2**1100`` is a mismatch, not an
    OverflowError). A non-finite value only matches the same non-finite value (``nan`` matches ``nan``),
    never a finite one: ``inf`` is not "within a relative tolerance" of every number.

    >>> numbers_close(float("inf"), 3, 1e-6), numbers_close(float("inf"), float("inf"), 1e-6)
    (False, True)
    >>> numbers_close(2**1100, 1e300, 1e-6), numbers_close(0.30000000000000004, 0.3, 1e-9)
    (False, True)
    """
    if isinstance(got, int) and isinstance(want, int):
        return got == want
    g_fin = not isinstance(got, float) or math.isfinite(got)
    w_fin = not isinstance(want, float) or math.isfinite(want)
    if not (g_fin and w_fin):
        if g_fin or w_fin:
            return False
        return got == want or (math.isnan(got) and math.isnan(want))
    if got == want:
        return True
    # Exact rationals: a float is a binary fraction, an int an int; no overflow, no rounding.
    fg, fw = Fraction(got), Fraction(want)
    diff, t = abs(fg - fw), Fraction(tol)
    return diff <= t or diff <= t * max(abs(fg), abs(fw))


MAX_VALUE_DEPTH = 200


def values_equal(got: Any, want: Any, tol: float = DEFAULT_FLOAT_TOL) -> bool:
    """JSON equality of a returned value with the expected one: lists and tuples alike, numbers as
    :func:`numbers_close` says, booleans only equal to booleans, keys as strings. Total: deeper than
    :data:`MAX_VALUE_DEPTH` is a mismatch, and no value makes it raise.

    >>> values_equal([1, 0.30000000000000004], (1, 0.3)), values_equal(True, 1), values_equal({"1": 2}, {1: 2})
    (True, False, True)
    """
    try:
        return _values_equal(got, want, tol, 0)
    except Exception:  # an odd value (a key whose str raises) is a mismatch, never a crash
        return False


def _values_equal(got: Any, want: Any, tol: float, _depth: int) -> bool:
    if _depth > MAX_VALUE_DEPTH:
        return False
    if isinstance(got, bool) or isinstance(want, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        return numbers_close(got, want, tol)
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(_values_equal(x, y, tol, _depth + 1) for x, y in zip(got, want))
    if isinstance(got, Mapping) and isinstance(want, Mapping):
        g2 = {str(k): v for k, v in got.items()}
        w2 = {str(k): v for k, v in want.items()}
        return g2.keys() == w2.keys() and all(_values_equal(g2[k], w2[k], tol, _depth + 1) for k in g2)
    return type(got) is type(want) and got == want


# ------------------------------------------------------------------------------------------ extraction
# A fence opens a line, or follows a tag directly (``<EXECUTION>```python``, as chains write it).
# The run of fence characters may not be followed by another (``(?!`)``) and a backtick fence's info string
# holds no backtick (CommonMark): so a line of a million backticks fails in one pass, not by backtracking.
_FENCE = re.compile(
    r"(?:^|(?<=>))[ \t]*(?:(`{3,})(?!`)[ \t]*([A-Za-z0-9_+.-]*)[^\n`]*|(~{3,})(?!~)[ \t]*([A-Za-z0-9_+.-]*)[^\n]*)\n",
    re.M,
)
PYTHON_TAGS = ("python", "py", "python3")


def extract_code(text: str) -> tuple[str | None, str]:
    """The program in a response: the last fenced block tagged python (``python``, ``py``, ``python3``), else
    the last fenced block of any language, else None. Returns ``(code or None, method)`` where method is
    ``python_block``, ``block``, ``unclosed_block`` (a final fence never closed, as a cut-off response has)
    or ``none``. Linear time; never raises.

    >>> extract_code("plan\\n```python\\nprint(1)\\n```\\ntext\\n```\\nx\\n```")
    ('print(1)\\n', 'python_block')
    >>> extract_code("no code here")
    (None, 'none')
    """
    if not isinstance(text, str) or ("```" not in text and "~~~" not in text):
        return None, "none"
    blocks: list[tuple[str, str, bool]] = []  # (lang, body, closed)
    pos = 0
    while True:
        m = _FENCE.search(text, pos)
        if m is None:
            break
        fence = m.group(1) or m.group(3)
        lang = (m.group(2) if m.group(1) else m.group(4)).lower()
        # A closing fence ends its line, or a tag follows it (``````</EXECUTION>``).
        close = re.compile(
            r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*(?=$|<)", re.M
        )
        c = close.search(text, m.end())
        if c is None:
            blocks.append((lang, text[m.end() :], False))
            break
        blocks.append((lang, text[m.end() : c.start()], True))
        pos = c.end()
    if not blocks:
        return None, "none"
    # An empty block is not a program (a fence flood is all empty blocks).
    closed = [b for b in blocks if b[2] and b[1].strip()]
    py = [b for b in closed if b[0] in PYTHON_TAGS]
    if py:
        return py[-1][1], "python_block"
    if closed:
        return closed[-1][1], "block"
    lang, body, _ = blocks[-1]
    return (body, "unclosed_block") if body.strip() else (None, "none")
