"""Test-time search on code problems: programs vote by their behaviour on the public tests, hidden tests are
never run before a method has chosen, the ReAct loop refines from public-test failures, and sandbox seconds
are metered beside tokens. Programs run in the local sandbox (a few dozen short runs)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.core.errors import UserError
from e2c.data.registry import Record
from e2c.generation.scripted import ASSISTANT, ScriptedGenerator
from e2c.rewards import code_judge
from e2c.rewards.code_tests import parse_tests
from e2c.rewards.vote import behaviour_classes, majority_class, program_key
from e2c.sandbox import SANDBOX_HELP, setting
from e2c.tts import TTSSettings, run_method
from e2c.tts.base import Candidate, weighted_vote
from e2c.tts.cli import build_parser
from e2c.tts.methods import clip, describe_failure, error_line
from e2c.tts.run import format_table, nested_records, summarize

# Two public tests and one hidden one; the hidden input and output appear nowhere else.
HIDDEN_IN, HIDDEN_OUT = "40 2", "42"
TESTS = {
    "mode": "stdin",
    "tests": [
        {"input": "1 2", "output": "3", "public": True},
        {"input": "2 2", "output": "4", "public": True},
        {"input": HIDDEN_IN, "output": HIDDEN_OUT},
    ],
    "time_limit": 5,
}
REC = Record(id="c1", problem="Read two integers and print their sum.", answer=json.dumps(TESTS), kind="code")
SET = TTSSettings(
    explore_budget=40, execute_budget=80, cot_tokens=120, judge_tokens=8, refine_tokens=20, seed=1
)

# Programs, by keyword of the plan that leads to them. add/add2/add3: the same behaviour, three spellings;
# mul: a different output on public test 1; crash: a runtime error; fake: the public answers hard-coded
# (the same public behaviour as add, wrong on the hidden test).
PROGRAMS = {
    "add1": "print(sum(map(int, input().split())))",
    "add2": "a, b = map(int, input().split())\nprint(a + b)",
    "add3": "x = input().split()\nprint(int(x[0]) + int(x[1]))",
    "mul": "a, b = map(int, input().split())\nprint(a * b)",
    "crash": "print(1 // 0)",
    "fake": 'print({"1 2": 3, "2 2": 4}[input().strip()])',
}


def _execution(plan: str) -> str:
    key = next((k for k in PROGRAMS if k in plan), None)
    if key is None:
        return "I cannot write it.</EXECUTION>"
    return f"Here it is.\n```python\n{PROGRAMS[key]}\n```</EXECUTION>"


def scripted(plans: list[str], judge: str = "1", refine: str = "") -> ScriptedGenerator:
    """Explorations ``plans[j % len]``; each execution writes the program its plan's keyword names."""

    def script(prompt: str, j: int) -> str:
        if "Reply with the plan number only" in prompt:
            return judge
        if "Write a revised, better plan" in prompt:
            return refine
        written = prompt.rsplit(ASSISTANT, 1)[-1]
        if "<EXECUTION>" in written:
            return _execution(written.split("</EXPLORATION>")[0])
        plan = plans[j % len(plans)]
        return plan + "</EXPLORATION><EXECUTION>" + _execution(plan)

    return ScriptedGenerator(script)


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[str, ...]]]:
    """Every judge call as (program, the inputs of the tests it was given), in order."""
    calls: list[tuple[str, tuple[str, ...]]] = []
    real = code_judge.judge

    def spy(program: str, tests: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append((program.strip(), tuple(t.input for t in tests.tests)))
        return real(program, tests, *args, **kwargs)

    monkeypatch.setattr(code_judge, "judge", spy)
    return calls


def _selection(calls: list[tuple[str, tuple[str, ...]]]) -> list[tuple[str, tuple[str, ...]]]:
    """The calls before the first one that holds the hidden test (a final grading)."""
    first_full = next((i for i, (_, ins) in enumerate(calls) if HIDDEN_IN in ins), len(calls))
    return calls[:first_full]


# ------------------------------------------------------------------------------------- the pure grouping
def _classes_by_loop(keys: list[Any]) -> list[int | None]:
    """The plain reading: a program joins the class of the first earlier program with an equal key."""
    out: list[int | None] = []
    reps: list[Any] = []
    for k in keys:
        if k is None:
            out.append(None)
            continue
        for i, r in enumerate(reps):
            if r == k:
                out.append(i)
                break
        else:
            reps.append(k)
            out.append(len(reps) - 1)
    return out


_KEY = st.one_of(st.none(), st.tuples(st.sampled_from(["run", "text"]), st.sampled_from(["a", "b", "!x"])))


@settings(max_examples=300, deadline=None)
@given(st.lists(_KEY, max_size=30))
def test_behaviour_classes_match_a_plain_loop_cpu(keys: list[Any]) -> None:
    assert behaviour_classes(keys) == _classes_by_loop(keys)


def test_program_key_runs_and_text_never_collide_cpu() -> None:
    assert program_key("print(1)", ("x",)) == ("run", "x")
    assert program_key("print(1)\n\n", None) == program_key("print(1)", None) == ("text", "print(1)")
    assert program_key("  ", ("x",)) is None and program_key(None, None) is None
    # A behaviour that happens to read like a text key is still a run's.
    assert program_key("p", ("p",)) != program_key("p", None)
    classes = behaviour_classes(
        [program_key("a", ("1",)), program_key("b", ("1",)), program_key("c", ("2",))]
    )
    assert classes == [0, 0, 1] and majority_class(classes) == 0


# -------------------------------------------------------------------------------------- votes over programs
@pytest.mark.parametrize("method", ["self_consistency", "e2c_sc"])
def test_programs_vote_by_public_behaviour_cpu(method: str, judged: list) -> None:
    # mul first: a vote by text (five different programs, all ties) would pick it; by behaviour the three
    # adders are one vote of three.
    gen = scripted(["mul ", "add1 ", "crash ", "add2 ", "add3 "])
    res = run_method(method, gen, REC, 5, SET)
    assert res.answer is not None and res.answer.strip() == PROGRAMS["add1"]
    assert res.correct  # graded on every test, the hidden one included
    assert res.details["votes"] == [0, 1, 2, 1, 1]
    assert res.details["code_vote"] == {"by": "public_tests", "tests": 2, "classes": 3}
    selection = _selection(judged)
    # Every program ran on the public tests only, once each, before any grading.
    assert len(selection) == 5 and all(ins == ("1 2", "2 2") for _, ins in selection)
    assert {p for p, _ in selection} == {PROGRAMS[k] for k in ("mul", "add1", "crash", "add2", "add3")}
    # After the search, only chosen programs are graded in full: budget 5's (add1), and the nested
    # budgets' choices (mul for k <= 3: ties go to the first seen).
    graded = [p for p, ins in judged[len(selection) :]]
    assert all(ins == ("1 2", "2 2", HIDDEN_IN) for _, ins in judged[len(selection) :])
    assert set(graded) == {PROGRAMS["mul"], PROGRAMS["add1"]} and len(graded) == 2
    prefix = res.details["prefix"]
    assert [p["correct"] for p in prefix] == [False, False, False, True, True]
    assert all(p["sandbox_s"] > 0 for p in prefix)
    # Sandbox seconds beside tokens: the public runs plus the chosen program's grading.
    by = res.sandbox_by_role
    assert set(by) == {"select", "grade", "prefix"} and by["select"] > 0 and by["grade"] > 0
    assert res.sandbox_s == pytest.approx(by["select"] + by["grade"], abs=1e-3)
    assert res.to_dict()["sandbox_s"] == res.sandbox_s


def test_selection_never_sees_the_hidden_test_cpu(judged: list) -> None:
    # The hard-coded program behaves like the adders on the public tests: it is in the majority class and,
    # seen first, answers; it then fails the hidden test. Selection cannot tell (it must not).
    gen = scripted(["fake ", "mul ", "add1 ", "mul ", "add2 "])
    res = run_method("self_consistency", gen, REC, 5, SET)
    assert res.answer is not None and res.answer.strip() == PROGRAMS["fake"]
    assert not res.correct
    assert res.details["votes"] == [0, 1, 0, 1, 0]
    for program, ins in _selection(judged):
        assert HIDDEN_IN not in ins, program


def test_no_public_tests_votes_by_text_and_says_so_cpu(judged: list) -> None:
    tests = {**TESTS, "tests": [{k: v for k, v in t.items() if k != "public"} for t in TESTS["tests"]]}
    rec = Record(id="c2", problem=REC.problem, answer=json.dumps(tests), kind="code")
    gen = scripted(["mul ", "add1 ", "add2 ", "mul "])
    res = run_method("self_consistency", gen, rec, 4, SET)
    assert res.details["code_vote"] == {"by": "text", "why": "the problem has no public tests", "classes": 3}
    assert res.answer is not None and res.answer.strip() == PROGRAMS["mul"]  # two identical texts
    # Nothing ran during selection: every judge call is a full grading of a chosen program.
    assert all(HIDDEN_IN in ins for _, ins in judged) and judged
    assert "select" not in res.sandbox_by_role and res.sandbox_s > 0


def test_a_vote_over_programs_needs_the_context_cpu() -> None:
    from e2c.rewards.grader import grade

    g = grade("```python\nprint(1)\n```", None, "code", fmt=None)
    with pytest.raises(ValueError, match="pass the method's Context"):
        weighted_vote([Candidate("", None, g)])


def test_single_pick_methods_grade_only_their_choice_cpu(judged: list) -> None:
    gen = scripted(["mul ", "add1 ", "add2 "], judge="2")
    res = run_method("e2c_select_lm_judge", gen, REC, 3, SET)
    assert res.correct and res.answer is not None and res.answer.strip() == PROGRAMS["add1"]
    assert judged == [(PROGRAMS["add1"], ("1 2", "2 2", HIDDEN_IN))]  # one run: the chosen program, graded
    assert res.sandbox_by_role.keys() == {"grade"} and "code_vote" not in res.details


def test_math_records_carry_zero_sandbox_seconds_cpu() -> None:
    rec = Record(id="m", problem="What is 7 + 5?", answer="12", kind="math")

    def script(prompt: str, j: int) -> str:
        return "add</EXPLORATION><EXECUTION>7 + 5 = \\boxed{12}</EXECUTION>"

    res = run_method("self_consistency", ScriptedGenerator(script), rec, 2, SET)
    assert res.correct and res.sandbox_s == 0.0 and res.sandbox_by_role == {}
    assert "code_vote" not in res.details and all(p["sandbox_s"] == 0.0 for p in res.details["prefix"])


# ------------------------------------------------------------------------------------------- ReAct feedback
def test_react_refines_from_the_public_failure_cpu(judged: list) -> None:
    gen = scripted(["mul first "], judge="1", refine="add1 instead")
    res = run_method("e2c_react_loop", gen, REC, 3, SET)
    assert res.correct and res.answer is not None and res.answer.strip() == PROGRAMS["add1"]
    trace = res.details["trace"]
    assert [t["accepted"] for t in trace] == [False, True]
    assert trace[0]["public_failure"] == "1 of 2 public tests failed. The first, public test 1:"
    assert trace[1]["public_failure"] == ""
    (refine_call,) = [c for c in gen.calls if "Write a revised, better plan" in c["prompts"][0]]
    prompt = refine_call["prompts"][0]
    assert "public tests the problem shows" in prompt
    assert "input:\n1 2\nexpected output:\n3\ngot:\n2" in prompt  # mul's output on public test 1
    assert HIDDEN_IN not in prompt and HIDDEN_OUT not in prompt
    for _, ins in _selection(judged):
        assert HIDDEN_IN not in ins
    assert res.sandbox_by_role["feedback"] > 0 and res.sandbox_by_role["select"] > 0
    assert res.sandbox_s == pytest.approx(
        sum(v for k, v in res.sandbox_by_role.items() if k != "prefix"), abs=1e-3
    )


def test_react_feedback_names_the_error_cpu() -> None:
    gen = scripted(["crash plan "], judge="1", refine="add2 now")
    res = run_method("e2c_react_loop", gen, REC, 2, SET)
    assert res.correct
    prompt = next(c["prompts"][0] for c in gen.calls if "Write a revised, better plan" in c["prompts"][0])
    assert "2 of 2 public tests failed" in prompt and "result: it raised ZeroDivisionError" in prompt


def test_describe_failure_is_bounded_and_public_only_cpu() -> None:
    tests = parse_tests(TESTS)
    public = tests.only(tests.public)
    text = describe_failure(public, 1, 1, "wrong", got="x" * 5000)
    assert "public test 2" in text and "input:\n2 2" in text and "expected output:\n4" in text
    assert len(text) < 600 and "(5000 characters)" in text and HIDDEN_IN not in text
    assert "ran past the time limit (5 s)" in describe_failure(public, 0, 2, "timeout")
    call = parse_tests(
        {"mode": "call", "fn_name": "f", "tests": [{"args": [1, "a"], "output": [2], "public": True}]}
    )
    text = describe_failure(call, 0, 1, "wrong")
    assert 'call: f(1, "a")' in text and "expected return value: [2]" in text and "a different value" in text
    asserts = parse_tests({"mode": "assert", "tests": [{"code": "assert f(1) == 2", "public": True}]})
    assert "test code:\nassert f(1) == 2" in describe_failure(
        asserts, 0, 1, "runtime_error", "AssertionError"
    )
    assert (
        clip("abc", 5) == "abc"
        and error_line("") == ""
        and error_line("a\nValueError: x\n\n") == "ValueError: x"
    )


# ------------------------------------------------------------------------------------ records and summary
def test_summary_and_nested_records_carry_sandbox_seconds_cpu() -> None:
    res = run_method("e2c_sc", scripted(["mul ", "add1 ", "add2 "]), REC, 3, SET).to_dict()
    subs = nested_records(res, [1, 2, 3])
    assert [s["sandbox_s"] for s in subs] == [p["sandbox_s"] for p in res["details"]["prefix"][:2]]
    rows = summarize([res, {**res, "problem_id": "other", "sandbox_s": 0.0}])
    assert rows[0]["sandbox_s"] == round(res["sandbox_s"] / 2, 3)
    assert "sandbox s" in format_table(rows)
    old = {k: v for k, v in res.items() if k != "sandbox_s"}  # a record of an older toolkit
    assert "sandbox_s" not in summarize([old, res])[0] and "sandbox_s" not in nested_records(old, [1])[0]
    assert format_table(summarize([old])).splitlines()[1].split()[6] == "-"


# --------------------------------------------------------------------------------------------- --sandbox
def test_sandbox_flag_is_parsed_at_the_edge_cpu() -> None:
    args = build_parser().parse_args(["--sandbox", "bwrap"])
    assert str(setting(args.sandbox, env={"E2C_SANDBOX": "local"})) == "bwrap"
    assert str(setting(None, env={"E2C_SANDBOX": "http://h:8080/"})) == "fusion:http://h:8080"
    assert setting(None, env={"E2C_SANDBOX": ""}) is None
    with pytest.raises(UserError, match=r"--sandbox 'nope' is not a sandbox; valid: local, bwrap"):
        setting("nope")
    with pytest.raises(UserError, match=r"\$E2C_SANDBOX 'nope' is not a sandbox"):
        setting(None, env={"E2C_SANDBOX": "nope"})
    sandbox_action = next(a for a in build_parser()._actions if "--sandbox" in a.option_strings)
    assert sandbox_action.help == SANDBOX_HELP and sandbox_action.default is None


def test_a_code_run_writes_sandbox_seconds_to_records_and_csv_cpu(tmp_path: Any) -> None:
    import csv

    from e2c.tts.run import read_done, run_tts

    out = tmp_path / "run"
    rows = run_tts(
        scripted(["mul ", "add1 ", "add2 "]),
        [REC],
        ["e2c_sc", "e2c_rp"],
        [1, 3],
        SET,
        out,
        {"dataset": "code-test", "model": "scripted", "settings": SET.to_dict()},
        log=lambda _: None,
        nested=True,
    )
    done = read_done(out / "records.jsonl")
    assert len(done) == 4 and all("sandbox_s" in r for r in done.values())
    by = {(r["method"], r["budget"]): r for r in rows}
    assert by[("e2c_sc", 3)]["accuracy"] == 1.0 and by[("e2c_sc", 3)]["sandbox_s"] > 0
    assert by[("e2c_sc", 1)]["accuracy"] == 0.0  # read off the first draw (mul), nested
    with (out / "results.csv").open() as f:
        table = list(csv.DictReader(f))
    assert all(float(r["sandbox_s"]) > 0 for r in table)
