"""The code answer kind: the tests schema, the comparison rules (against plain reference loops), program
extraction (properties and hostile text), and the judge in each mode, through the one grader."""

from __future__ import annotations

import json
import re
import time
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import e2c.sandbox as sandbox_mod
from e2c.rewards.code_judge import judge
from e2c.rewards.code_tests import CodeTestsError, extract_code, outputs_equal, parse_tests, values_equal
from e2c.rewards.grader import grade
from e2c.rewards.kinds import CODE, find_kind
from e2c.sandbox import RunResult, from_env


def chain(program: str, lang: str = "python") -> str:
    return f"1. Read.\n2. Solve.</EXPLORATION><EXECUTION>Carry it out.\n```{lang}\n{program}```\n</EXECUTION>"


CALL = {
    "mode": "call",
    "fn_name": "add",
    "tests": [{"args": [1, 2], "output": 3, "public": True}, {"args": [5, 5], "output": 10}],
}
STDIN = {"mode": "stdin", "tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "4 5\n", "output": "9"}]}
ASSERT = {
    "mode": "assert",
    "tests": [{"code": "assert sq(2) == 4", "public": True}, {"code": "assert sq(3) == 9"}],
}


# ------------------------------------------------------------------------------------------------ schema
@pytest.mark.parametrize(
    ("obj", "words"),
    [
        ({"mode": "stdin", "tests": []}, "no tests"),
        ({"tests": [{"input": "", "output": ""}]}, "unknown mode None; valid: stdin, call, assert"),
        (
            {"mode": "stdin", "compare": "fuzzy", "tests": [{"input": "", "output": ""}]},
            "unknown comparison rule 'fuzzy'",
        ),
        (
            {"mode": "stdin", "tests": [{"input": 1, "output": ""}]},
            "test 0: a stdin test's input and output are text",
        ),
        ({"mode": "stdin", "tests": [{"args": [], "output": ""}]}, "test 0 of a stdin problem has fields"),
        ({"mode": "call", "tests": [{"args": [], "output": 1}]}, "call tests need fn_name"),
        (
            {"mode": "call", "fn_name": "a b", "tests": [{"args": [], "output": 1}]},
            "fn_name must be a Python identifier",
        ),
        (
            {"mode": "call", "fn_name": "f", "tests": [{"args": 3, "output": 1}]},
            "args is the list of arguments",
        ),
        ({"mode": "assert", "tests": [{"code": "  "}]}, "non-empty text"),
        ({"mode": "assert", "tests": "assert 1"}, "tests must be a list"),
        ({"mode": "assert", "time_limit": 0, "tests": [{"code": "x"}]}, "time_limit must be a number"),
        ({"mode": "assert", "tests": [{"code": "x", "public": "yes"}]}, "public must be true or false"),
        ({"mode": "assert", "tests": [{"code": "x"}], "checker": "x"}, "unknown field 'checker'"),
        ("[[[", "not JSON"),
        ([1, 2], "a code reference is a JSON object"),
    ],
)
def test_bad_references_are_one_line_naming_the_problem_cpu(obj, words) -> None:
    with pytest.raises(CodeTestsError) as e:
        parse_tests(obj)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_round_trip_and_public_split_cpu() -> None:
    t = parse_tests(CALL)
    assert parse_tests(t.dumps()) == t
    assert [x.args for x in t.public] == [(1, 2)]
    assert t.only(t.public).tests == t.public


def test_kind_is_registered_with_its_prompt_cpu() -> None:
    assert find_kind("code") is CODE and CODE.runs_programs and CODE.object_gold
    assert "```python" in CODE.prompt_suffix and "boxed" not in CODE.prompt_suffix


# ----------------------------------------------------------------------------------------- comparisons
def ref_tokens_equal(a: list[str], b: list[str], tol: float) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            dx, dy = Decimal(x), Decimal(y)
        except Exception:
            return False
        if not (dx.is_finite() and dy.is_finite()) or len(x) > 100 or len(y) > 100:
            return False
        d = abs(dx - dy)
        if d > Decimal(tol) and d > Decimal(tol) * max(abs(dx), abs(dy)):
            return False
    return True


def ref_lines_equal(got: str, want: str, tol: float) -> bool:
    g, w = got.strip().splitlines(), want.strip().splitlines()
    if len(g) != len(w):
        return False
    for i in range(len(g)):
        if g[i].strip() != w[i].strip() and not ref_tokens_equal(g[i].split(), w[i].split(), tol):
            return False
    return True


token = st.sampled_from(["1", "1.0", "1.0000001", "2", "-0", "0", "a", "b", "1e3", "1000", "nan", "inf", ""])
text = st.lists(st.lists(token, max_size=4).map(" ".join), max_size=4).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(text, text, st.sampled_from([0.0, 1e-6, 0.1]))
def test_lines_rule_matches_a_plain_loop_cpu(got: str, want: str, tol: float) -> None:
    assert outputs_equal(got, want, "lines", tol) == ref_lines_equal(got, want, tol)
    assert outputs_equal(got, want, "tokens", tol) == ref_tokens_equal(got.split(), want.split(), tol)


@pytest.mark.parametrize(
    ("got", "want", "equal"),
    [
        ([1, 2], (1, 2), True),
        (0.1 + 0.2, 0.3, True),
        (1e-9, 0.0, True),
        (1.0, 1.01, False),
        (True, 1, False),
        (1, True, False),
        ({"a": [1]}, {"a": (1,)}, True),
        ("1", 1, False),
        (None, None, True),
        (float("nan"), float("nan"), True),
        ([1, [2, [3]]], [1, [2, [4]]], False),
    ],
)
def test_json_rule_cpu(got, want, equal) -> None:
    assert values_equal(got, want) is equal


def test_deep_values_do_not_recurse_forever_cpu() -> None:
    deep = current = []
    for _ in range(10_000):
        current.append([])
        current = current[0]
    assert values_equal(deep, deep) is False  # past the depth bound: not equal, never a RecursionError


# ------------------------------------------------------------------------------------------ extraction
no_fence = st.text(st.characters(blacklist_characters="`~"), max_size=200)


@settings(max_examples=300, deadline=None)
@given(no_fence)
def test_text_without_fences_has_no_program_cpu(t: str) -> None:
    assert extract_code(t) == (None, "none")


body = st.text(
    st.characters(blacklist_characters="`~\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"), min_size=1, max_size=200
)


@settings(max_examples=300, deadline=None)
@given(no_fence, body.filter(lambda b: b.strip()), no_fence, st.sampled_from(["python", "py", "python3"]))
def test_last_python_block_is_the_program_cpu(pre: str, prog: str, post: str, lang: str) -> None:
    prog = prog if prog.endswith("\n") else prog + "\n"
    text = f"{pre}\n```cpp\nint x;\n```\n```{lang}\n{prog}```\n{post}\n```\nnot python\n```\n"
    assert extract_code(text) == (prog, "python_block")


HOSTILE_TEXT = [
    "```" * 300_000,
    "```python\n" * 100_000,
    "~~~~\n" * 200_000,
    "```python\n" + "x" * (1 << 20),
    "\x00```python\n\x00print(1)\x00\n```\x00",
    ("`" * 1000 + "\n") * 1000,
    "```python\n```\n" * 100_000,
]


@pytest.mark.parametrize("t", HOSTILE_TEXT, ids=range(len(HOSTILE_TEXT)))
def test_extraction_is_linear_on_hostile_text_cpu(t: str) -> None:
    start = time.perf_counter()
    code, method = extract_code(t)
    assert time.perf_counter() - start < 2.0
    assert method in ("python_block", "block", "unclosed_block", "none")
    assert code is None or code.strip()


def test_fences_glued_to_tags_are_found_cpu() -> None:
    assert extract_code("<EXECUTION>```python\nx = 1\n```</EXECUTION>") == ("x = 1\n", "python_block")


# ----------------------------------------------------------------------------------------------- judge
def test_call_mode_through_the_grader_cpu() -> None:
    r = grade(chain("def add(a, b):\n    return a + b\n"), json.dumps(CALL), "code")
    assert (r.correct, r.reason, r.check, r.tests_passed, r.tests_total) == (
        True,
        "correct",
        "tests 2/2",
        2,
        2,
    )
    assert r.sandbox_s is not None and r.sandbox_s > 0
    w = grade(chain("def add(a, b):\n    return 3\n"), CALL, "code")
    assert (w.correct, w.reason, w.check) == (False, "wrong", "tests 1/2")


def test_solution_class_method_is_called_cpu() -> None:
    prog = "class Solution:\n    def add(self, a, b):\n        return a + b\n"
    assert grade(chain(prog), CALL, "code").correct


def test_stdin_mode_and_stop_on_fail_cpu() -> None:
    prog = "a, b = map(int, input().split())\nprint(a + b)\n"
    assert grade(chain(prog), STDIN, "code").correct
    bad = "print(3)\n"
    v = judge(bad, parse_tests(STDIN), from_env())
    assert (v.passed, v.outcomes) == (1, ("pass", "wrong"))
    tests = parse_tests({"mode": "stdin", "tests": [{"input": "", "output": "x"}] + STDIN["tests"]})
    v = judge(bad, tests, from_env(), stop_on_fail=True)
    assert v.outcomes == ("wrong", "not_run", "not_run") and v.passed == 0


def test_assert_mode_cpu() -> None:
    assert grade(chain("def sq(x):\n    return x * x\n"), ASSERT, "code").correct
    r = grade(chain("def sq(x):\n    return 4\n"), ASSERT, "code")
    assert r.check == "tests 1/2"


def test_one_slow_call_does_not_cost_the_other_tests_cpu() -> None:
    tests = parse_tests(
        {
            "mode": "call",
            "fn_name": "f",
            "time_limit": 0.5,
            "tests": [{"args": [0], "output": 0}, {"args": [1], "output": 1}, {"args": [2], "output": 2}],
        }
    )
    v = judge("def f(x):\n    while x == 1:\n        pass\n    return x\n", tests, from_env())
    assert v.outcomes == ("pass", "timeout", "pass")


def test_programs_prints_do_not_forge_results_cpu() -> None:
    prog = 'import os\nos.write(1, b"deadbeef {\\"i\\": 0, \\"v\\": 3}\\n")\nprint("{\\"i\\": 1, \\"v\\": 10}")\ndef add(a, b):\n    return 0\n'
    v = judge(prog, parse_tests(CALL), from_env())
    assert v.passed == 0


def test_no_block_and_bad_tests_and_too_long_cpu() -> None:
    assert grade("plan</EXPLORATION><EXECUTION>no code</EXECUTION>", CALL, "code").reason == "no_answer"
    assert (
        grade(chain("def add(a, b): return a + b\n"), {"mode": "call"}, "code").reason == "unparseable_gold"
    )
    r = grade(chain("x = 1\n" * 20_000), CALL, "code")
    assert (r.reason, r.check) == ("wrong", "too_long")


class _Broken:
    name = "broken"

    def run(self, files, main, stdin, limits):
        return RunResult("sandbox_error", None, "", "server down", 0.01)

    def describe(self) -> str:
        return "broken: not isolated"


def test_a_sandbox_failure_is_an_error_never_a_wrong_answer_cpu() -> None:
    r = grade(chain("def add(a, b):\n    return a + b\n"), CALL, "code", sandbox=_Broken())
    assert (r.correct, r.reason, r.check) == (False, "error", "error")
    s = grade(chain("print(3)\n"), STDIN, "code", sandbox=_Broken())
    assert s.reason == "error"


def test_grade_runs_programs_where_it_is_told_else_where_the_environment_says_cpu(monkeypatch) -> None:
    """A command passes its sandbox to the grader; with none, the grader builds the one $E2C_SANDBOX names,
    once, and only when a program runs."""
    built = []

    def fake_make(spec=None):
        built.append(str(spec))
        return _Broken()

    monkeypatch.setattr(sandbox_mod, "make", fake_make)
    monkeypatch.setattr(sandbox_mod, "_from_env", None)
    monkeypatch.setenv(sandbox_mod.SANDBOX_ENV, "bwrap")
    assert grade("plan</EXPLORATION><EXECUTION>no code</EXECUTION>", CALL, "code").reason == "no_answer"
    assert grade(chain("print(3)\n"), STDIN, "math").reason == "no_answer"
    assert built == []  # nothing ran: nothing built
    told = grade(chain("print(3)\n"), STDIN, "code", sandbox=sandbox_mod.make("local"))
    assert told.reason == "error" and built == ["local"]  # the test double: built by the caller, used
    for _ in range(2):
        assert grade(chain("print(3)\n"), STDIN, "code").reason == "error"
    assert built == ["local", "bwrap"]  # the environment's, built once


def test_behaviour_keys_group_equal_outputs_cpu() -> None:
    t = parse_tests(CALL)
    a = judge("def add(a, b):\n    return a + b\n", t, from_env())
    b = judge("def add(a, b):\n    return b + a\n", t, from_env())
    c = judge("def add(a, b):\n    return a * b\n", t, from_env())
    assert a.behaviour == b.behaviour != c.behaviour
    d = parse_tests({"mode": "call", "fn_name": "f", "tests": [{"args": [], "output": {"a": 1, "b": 2}}]})
    ab = judge("def f():\n    return {'a': 1, 'b': 2}\n", d, from_env())
    ba = judge("def f():\n    return {'b': 2, 'a': 1}\n", d, from_env())
    assert ab.behaviour == ba.behaviour  # a dict's key order is not behaviour
    assert all(re.fullmatch(r"[0-9a-f]{16}|![a-z_A-Z]+", k) for k in a.behaviour + c.behaviour)
