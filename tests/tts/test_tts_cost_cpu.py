"""A TTS run's cost comes from its records (e2c.tts.run.run_cost and the summary): a finished run rerun into
its folder changes no number, and a killed run resumed reports the tokens and calls of one uninterrupted run
and the seconds its records hold."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from killed_run import DiesAfter, Killed

from e2c.data.registry import Record
from e2c.generation.scripted import ASSISTANT, ScriptedGenerator
from e2c.tts import TTSSettings
from e2c.tts.run import derived_from, read_done, run_cost, run_tts

RECORDS = [Record(f"q{i}", f"What is {i} + 12 - {i}?", "12", "math") for i in range(3)]
METHODS = ["greedy_cot", "self_consistency", "e2c_sc"]
BUDGETS = [1, 2, 4]
SETTINGS = TTSSettings(explore_budget=20, execute_budget=20, cot_tokens=40, seed=1)
EXACT = ("records", "derived_records", "generated_tokens", "prompt_tokens", "calls")


def script(prompt: str, j: int) -> str:
    """Plans and executions whose length varies with the sample, so every draw costs its own tokens."""
    written = prompt.rsplit(ASSISTANT, 1)[-1]
    if "<EXECUTION>" in written:
        return f"so {'and ' * (len(written) % 4)}\\boxed{{12}}</EXECUTION>"
    return f"plan {'step ' * j}</EXPLORATION><EXECUTION> so \\boxed{{{12 if j % 3 else 13}}}</EXECUTION>"


def run(gen, out: Path) -> list[dict]:
    return run_tts(gen, RECORDS, METHODS, BUDGETS, SETTINGS, out, {"t": 1}, log=lambda _m: None, nested=True)


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def recorded_seconds(out: Path) -> float:
    """The seconds the records of the methods that ran hold."""
    done = read_done(out / "records.jsonl").values()
    return round(math.fsum(r["seconds"] for r in done if not derived_from(r)), 3)


def test_the_cost_is_the_generators_and_a_rerun_changes_no_number(tmp_path: Path) -> None:
    gen = ScriptedGenerator(script)
    run(gen, tmp_path)
    cost = results(tmp_path)["cost"]
    # Each method ran once per problem at its largest budget (greedy_cot: once); the rest was read off those.
    assert cost["records"] == 3 * len(METHODS) and cost["derived_records"] == 3 * (2 + 2 + 2)
    assert cost["generated_tokens"] == gen.usage.generated_tokens > 0
    assert cost["prompt_tokens"] == gen.usage.prompt_tokens and cost["calls"] == gen.usage.calls
    assert cost["seconds"] == recorded_seconds(tmp_path) and "partial" not in cost
    before = {p: (tmp_path / p).read_bytes() for p in ("results.json", "results.csv")}

    again = ScriptedGenerator(script)
    run(again, tmp_path)
    assert again.calls == []
    assert {p: (tmp_path / p).read_bytes() for p in before} == before  # not one number changed


@pytest.mark.parametrize("how", ["killed mid-run", "record cut by the kill"])
def test_a_resumed_run_costs_what_one_run_costs(tmp_path: Path, how: str) -> None:
    run(ScriptedGenerator(script), tmp_path / "ref")
    ref = results(tmp_path / "ref")
    out = tmp_path / "run"
    if how == "killed mid-run":
        with pytest.raises(Killed):
            run(DiesAfter(ScriptedGenerator(script), 4), out)
        assert 0 < len(read_done(out / "records.jsonl")) < 3 * len(METHODS) * len(BUDGETS)
    else:
        run(ScriptedGenerator(script), out)
        path = out / "records.jsonl"
        text = path.read_text().splitlines()
        ran = [i for i, x in enumerate(text) if not derived_from(json.loads(x))]
        # Everything up to the last method run's record, which the kill cut in half.
        path.write_text("".join(x + "\n" for x in text[: ran[-1]]) + text[ran[-1]][:40])
    gen = ScriptedGenerator(script)
    run(gen, out)
    assert gen.calls, "the resume ran what was missing"
    got = results(out)
    assert {k: got["cost"][k] for k in EXACT} == {k: ref["cost"][k] for k in EXACT}
    assert got["cost"]["seconds"] == recorded_seconds(out)
    same = ("method", "budget", "problems", "accuracy", "tokens_k", "prompt_tokens_k", "calls")
    assert [{k: r[k] for k in same} for r in got["summary"]] == [
        {k: r[k] for k in same} for r in ref["summary"]
    ]


def test_run_cost_of_records_without_a_figure_is_partial() -> None:
    recs = [
        {"generated_tokens": 10, "prompt_tokens": 3, "calls": 1, "seconds": 0.5},
        {"generated_tokens": 4, "calls": 2},  # an older record with no prompt tokens or seconds
        {"generated_tokens": 10, "calls": 1, "seconds": 0.5, "details": {"nested_from": 4}},
    ]
    assert run_cost(recs) == {
        "records": 2,
        "derived_records": 1,
        "generated_tokens": 14,
        "prompt_tokens": 3,
        "calls": 3,
        "seconds": 0.5,
        "partial": ["prompt_tokens", "seconds"],
    }
