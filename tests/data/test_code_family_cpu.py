"""The synthetic code family: valid tests, a reference that passes them (checked here by a plain call loop),
determinism, the public/hidden split, the written function graded by the code kind, and the default
selection of families left as it was."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from e2c.chain import E2C
from e2c.data.schema import validate_rows
from e2c.data.synthetic import generate as gen
from e2c.data.synthetic.code_families import (
    HIDDEN_TESTS,
    PUBLIC_TESTS,
    SPECS,
    CodeTask,
    call_text,
    code,
    code_execution,
    code_plan,
)
from e2c.data.synthetic.families import FAMILIES, LEVELS, OPT_IN_FAMILIES, family_names
from e2c.data.synthetic.tracer import run_traced
from e2c.rewards.code_tests import extract_code, parse_tests, values_equal
from e2c.rewards.grader import grade
from e2c.rewards.kinds import CODE_PROMPT_SUFFIX
from e2c.rewards.plan import plan_adherence

SEEDS = range(60)


def tasks_at(level: int, seeds=SEEDS) -> list[CodeTask]:
    return [code(random.Random(f"t:{s}"), level) for s in seeds]


def run_reference(program: str, fn_name: str, args: list) -> object:
    """Call the written function in this process: the program is the toolkit's own code, not a model's."""
    namespace: dict = {}
    exec(program, namespace)
    return namespace[fn_name](*json.loads(json.dumps(args)))  # a fresh copy of the arguments


@pytest.mark.parametrize("level", LEVELS)
def test_each_level_makes_valid_tests_that_its_program_passes(level: int) -> None:
    for task in tasks_at(level):
        tests = parse_tests(task.gold)
        assert task.kind == "code" and task.family == "code" and task.level == level
        assert tests.mode == "call" and tests.fn_name == task.fn_name and tests.compare == "json"
        assert len(tests.tests) == PUBLIC_TESTS + HIDDEN_TESTS and len(tests.public) == PUBLIC_TESTS
        assert tests.tests[:PUBLIC_TESTS] == tests.public  # public first
        seen = {json.dumps(t.args) for t in tests.tests}
        assert len(seen) == len(tests.tests)  # no test twice
        for t in tests.tests:  # the plain loop: the written function against every expected output
            got = run_reference(task.program, task.fn_name, list(t.args))
            assert values_equal(got, t.output), (task.fn_name, t.args, got, t.output)
        assert task.expected == tests.tests[0].output and task.answer == task.program


def test_every_spec_is_drawn_and_keeps_its_edge_cases() -> None:
    drawn = {t.fn_name for lv in LEVELS for t in tasks_at(lv)}
    assert drawn == {s.name for s in SPECS}
    for level in LEVELS:
        for task in tasks_at(level, range(20)):
            spec = next(s for s in SPECS if s.name == task.fn_name)
            args = {json.dumps(list(t.args)) for t in parse_tests(task.gold).tests}
            assert all(json.dumps(list(e)) in args for e in spec.edges), task.fn_name


def test_public_tests_are_the_shown_examples_and_hidden_ones_are_not_shown() -> None:
    for level in LEVELS:
        for task in tasks_at(level, range(20)):
            tests = parse_tests(task.gold)
            examples = task.problem.split("Examples:\n", 1)[1].splitlines()
            assert examples == [f"{call_text(task.fn_name, t.args)} == {t.output!r}" for t in tests.public]
            for t in tests.tests[PUBLIC_TESTS:]:
                assert call_text(task.fn_name, t.args) not in task.problem
            assert f"`{task.signature}`" in task.problem and task.call == examples[0].split(" == ")[0]


def test_same_seed_same_task_other_seed_other_task() -> None:
    a, b = code(random.Random("9:1"), 2), code(random.Random("9:1"), 2)
    assert (a.problem, a.gold, a.program, a.steps) == (b.problem, b.gold, b.program, b.steps)
    assert code(random.Random("9:2"), 2).problem != a.problem


def test_narrated_chain_ends_with_the_function_and_follows_its_plan() -> None:
    tasks = [t for lv in LEVELS for t in tasks_at(lv, range(8))]
    traces = run_traced([t.source()[0] for t in tasks])
    for task, trace in zip(tasks, traces):
        assert trace.ok and trace.value == task.expected, (task.fn_name, trace.error)
        plan, execution = code_plan(task), code_execution(task, trace)
        program, method = extract_code(execution)
        assert (program, method) == (task.program, "python_block")
        assert execution.rstrip().endswith("```") and plan_adherence(plan, execution) == 1.0
        assert not re.search(r"^Check (.+?) with \1:", execution, re.M)  # a condition is said once
        # The first example's arguments are bound first; the program has no such line.
        spec = next(s for s in SPECS if s.name == task.fn_name)
        first = task.steps[0].lines[0].code
        assert first.split(" = ")[0] == ", ".join(n for n, _ in spec.params) and first not in task.program


@pytest.fixture(scope="module")
def made():
    return gen.generate(60, seed=4, families=["code"])


def test_generated_code_samples_grade_correct_and_wrong_when_mutated(made) -> None:
    samples, report = made
    solve = [s for s in samples if s.variant == "solve"]
    assert len(solve) == 60 and not report.dropped
    assert {s.level for s in solve} == set(LEVELS) and {s.kind for s in solve} == {"code"}
    for s in solve:
        chain = E2C.format_response(f"\n{s.exploration}\n", f"\n{s.execution}\n")
        res = grade(chain, s.gold, "code")
        assert res.correct and res.chain_status == "ok" and res.tests_passed == res.tests_total == 8
        assert res.extracted == s.answer
    # A mutated program fails: off by one in its result ...
    s = solve[0]
    tests = parse_tests(s.gold)
    result = s.answer.rstrip().splitlines()[-1].split("return ", 1)[1]
    broken = s.execution.replace(f"return {result}\n```", f"return [{result}]\n```")
    assert broken != s.execution
    res = grade(E2C.format_response(s.exploration, broken), s.gold, "code")
    assert not res.correct and res.reason == "wrong" and res.tests_passed == 0
    # ... and a program that only knows the public examples fails the hidden tests.
    table = {json.dumps(list(t.args)): t.output for t in tests.public}
    memorised = (
        f"```python\nimport json\ndef {tests.fn_name}(*args):\n"
        f"    return {table!r}.get(json.dumps(list(args)))\n```"
    )
    res = grade(E2C.format_response(s.exploration, memorised), s.gold, "code")
    assert not res.correct and res.tests_passed == PUBLIC_TESTS and res.tests_total == 8


def test_rows_ask_for_a_program_and_fit_their_schemas(made) -> None:
    samples, _ = made
    rows = gen.rows_by_split(samples)
    for split in ("sft", "rl", "eval"):
        assert validate_rows(rows[split], split, split) == len(rows[split])
    for row in rows["sft"]:
        user = row["messages"][-2]["content"]
        if row["extra_info"]["kind"] == "code":
            assert user.endswith(CODE_PROMPT_SUFFIX) and "boxed" not in user
        else:  # a variable-tracing question made from a code task is a math question
            assert row["extra_info"]["variant"] == "trace" and "boxed" in user
    assert all(r["ability"] == "code" and r["extra_info"]["kind"] == "code" for r in rows["rl"])
    assert all(r["kind"] == "code" and parse_tests(r["answer"]) for r in rows["eval"])


def test_code_tasks_that_disagree_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    real = OPT_IN_FAMILIES["code"]

    def wrong_tests(rng, level):  # the traced program still agrees; the tests do not
        task = real(rng, level)
        tests = json.loads(task.gold)
        tests["tests"][-1]["output"] = "not what the function returns"
        task.gold = json.dumps(tests)
        return task

    monkeypatch.setitem(OPT_IN_FAMILIES, "code", wrong_tests)
    with pytest.raises(RuntimeError, match="grader_disagrees"):
        gen.generate(5, seed=1, families=["code"])

    def wrong_value(rng, level):
        task = real(rng, level)
        task.expected = "something else"
        return task

    monkeypatch.setitem(OPT_IN_FAMILIES, "code", wrong_value)
    with pytest.raises(RuntimeError, match="program_disagrees"):
        gen.generate(5, seed=1, families=["code"])


def test_code_is_opt_in_so_default_outputs_are_unchanged() -> None:
    assert "code" not in FAMILIES and family_names() == (*FAMILIES, "code")
    assert all(gen.make_task(3, i).family != "code" for i in range(40))
    mixed = [gen.make_task(3, i, ["arithmetic", "code"]).family for i in range(4)]
    assert mixed == ["arithmetic", "code", "arithmetic", "code"]
    with pytest.raises(ValueError, match=r"unknown family 'cod'; families: .*small_arithmetic, code;"):
        gen.generate(2, families=["cod"])


def test_quickstart_mix_and_report_show_code(tmp_path: Path) -> None:
    from e2c.quickstart.config import DEFAULT_FAMILIES, FAST, Config
    from e2c.quickstart.context import Context
    from e2c.quickstart.report import by_kind, kind_lines

    assert "code" in DEFAULT_FAMILIES and "code" in FAST["families"]
    ctx = Context(Config(), tmp_path)

    def predictions(stage: str, rows: list[tuple[str, str, bool]], sampled: bool = False) -> None:
        folder = ctx.dir(stage) / ("sampled" if sampled else "") / "predictions"
        folder.mkdir(parents=True)
        lines = [json.dumps({"id": i, "kind": k, "correct": c}) for i, k, c in rows]
        (folder / "synthetic.jsonl").write_text("\n".join(lines) + "\n")

    predictions("baseline", [("m1", "math", True), ("m2", "math", False), ("c1", "code", False)])
    predictions("eval_sft", [("m1", "math", True), ("m2", "math", True), ("c1", "code", True)])
    predictions("eval_sft", [("m1", "math", True), ("m1", "math", False), ("c1", "code", True)] * 1, True)
    kinds = by_kind(ctx)
    assert kinds["baseline"]["code"] == {"correct": 0, "problems": 1, "accuracy": 0.0, "sampled": None}
    assert kinds["eval_sft"]["math"]["correct"] == 2 and kinds["eval_sft"]["math"]["sampled"] == 0.5
    assert kinds["eval_sft"]["code"]["sampled"] == 1.0
    lines = "\n".join(kind_lines({"by_kind": kinds, "measure": "avg@2 at T 1"}))
    assert "| baseline | 1/2 (50.0%) | - | 0/1 (0.0%) | - |" in lines
    assert (
        "- Code, greedy (a function that passes all its tests): baseline 0/1 (0.0%), SFT 1/1 (100.0%)."
        in lines
    )
    assert kind_lines({"by_kind": {"baseline": {"math": kinds["baseline"]["math"]}}}) == []
