"""Evaluation on programs: code sets are prompted for a fenced program (not a boxed value), each sample's
program runs on every test, and the results carry the share of tests passed and the sandbox's seconds."""

from __future__ import annotations

import json

from e2c.data.records import Record
from e2c.eval.metrics import summarize
from e2c.eval.runner import EvalConfig, dataset_format, prediction_lines
from e2c.generation.chains import ChainResult
from e2c.rewards.kinds import CODE_PROMPT_SUFFIX

TESTS = {
    "mode": "call",
    "fn_name": "inc",
    "tests": [{"args": [1], "output": 2, "public": True}, {"args": [5], "output": 6}],
}


def chain(program: str | None) -> ChainResult:
    body = f"```python\n{program}```\n" if program is not None else "no program here"
    return ChainResult(f"1. Add one.</EXPLORATION><EXECUTION>{body}</EXECUTION>", 5, 20, "tag", "stop")


def test_code_sets_ask_for_a_fenced_program_cpu() -> None:
    cfg = EvalConfig(model="tiny")
    fmt = dataset_format(cfg, "humaneval")
    assert fmt.prompt_suffix == CODE_PROMPT_SUFFIX
    assert "boxed" not in fmt.user_content("Write inc.")
    assert "boxed" in dataset_format(cfg, "aime24").user_content("What is 1+1?")


def test_prediction_lines_and_summary_of_programs_cpu() -> None:
    rec = Record("p-1", "Write inc(x).", json.dumps(TESTS), "code", data_source="humaneval")
    chains = [
        chain("def inc(x):\n    return x + 1\n"),
        chain("def inc(x):\n    return 2\n"),  # passes the first test only
        chain(None),
    ]
    lines = prediction_lines("humaneval", 0, rec, chains, EvalConfig(model="tiny"))
    assert [ln["correct"] for ln in lines] == [True, False, False]
    assert [(ln["tests_passed"], ln["tests_total"]) for ln in lines] == [(2, 2), (1, 2), (None, None)]
    assert [ln["reason"] for ln in lines] == ["correct", "wrong", "no_answer"]
    m = summarize([lines])
    assert abs(m["pass@1"] - 1 / 3) < 1e-9
    assert abs(m["tests_passed_rate"] - (1.0 + 0.5 + 0.0) / 3) < 1e-9
    assert m["sandbox_s"] > 0 and m["sandbox_error_rate"] == 0.0


def test_math_results_carry_no_program_figures_cpu() -> None:
    rec = Record("m-1", "1+1?", "2", "math", data_source="aime24")
    ch = ChainResult("p</EXPLORATION><EXECUTION>\\boxed{2}</EXECUTION>", 1, 2, "tag", "stop")
    lines = prediction_lines("aime24", 0, rec, [ch], EvalConfig(model="tiny"))
    assert "tests_total" not in lines[0]
    assert "tests_passed_rate" not in summarize([lines])
