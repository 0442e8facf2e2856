"""An evaluation's cost comes from its prediction lines (e2c.eval.cost): a finished run rerun into its folder,
or a killed run resumed, reports the tokens, calls and sequences of one uninterrupted run and the seconds its
lines recorded; lines of an older toolkit (no "call") still load, and the cost says it is partial."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from killed_run import DiesAfter, Killed

from e2c.data.registry import Record
from e2c.eval.cost import add_costs, batch_call, total_cost
from e2c.eval.runner import EvalConfig, run_eval
from e2c.generation.scripted import ScriptedGenerator

ROOT = Path(__file__).resolve().parents[2]
EXACT = ("records", "generated_tokens", "calls", "sequences", "prompt_tokens")


def chain(answer: str, plan: str = "Plan: compute.") -> str:
    return f"{plan}</EXPLORATION><EXECUTION> so \\boxed{{{answer}}}</EXECUTION>"


MATH = [
    Record("gsm8k-a", "What is 2+3?", "5", "math"),
    Record("gsm8k-b", "What is 10/4?", "2.5", "math"),
    Record("gsm8k-c", "What is 7*6?", "42", "math"),
]
RESPONSES = {
    "2+3": [chain("5"), chain("5", "Add them up, carefully."), chain("6"), chain("5")],
    "10/4": [chain("5/2"), chain("2"), chain("2", "Divide."), "I think it is 2.5 but no tags"],
    "7*6": [chain("41"), chain("43", "Multiply the two numbers."), chain("40"), chain("42")[:30]],
}


def config(**kw) -> EvalConfig:
    base = dict(model="scripted", samples=4, max_tokens=200, chunk_size=4, backend="scripted")
    return EvalConfig(**{**base, **kw})


def scripted() -> ScriptedGenerator:
    return ScriptedGenerator.from_responses(RESPONSES)


def lines_of(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "predictions" / "gsm8k.jsonl").read_text().splitlines()]


def recorded_seconds(lines: list[dict]) -> float:
    """The seconds the lines hold: each line's share of its chunk's generation seconds."""
    return round(math.fsum(x["call"]["seconds"] / x["call"]["records"] for x in lines), 3)


def results_of(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


@pytest.mark.parametrize("two_phase", [False, True], ids=["one-call", "two-phase"])
def test_the_cost_is_the_generators_and_a_rerun_keeps_it(tmp_path: Path, two_phase: bool) -> None:
    budgets = {"explore_budget": 6, "execute_budget": 40} if two_phase else {}
    gen = scripted()
    first = run_eval(gen, {"gsm8k": MATH}, config(**budgets), tmp_path)
    cost = first["usage"]
    # One uninterrupted run: the lines' cost is what the generator counted (1 or 2 calls per chunk).
    assert cost["calls"] == gen.usage.calls == len(gen.calls) == 3 * (2 if two_phase else 1)
    assert cost["sequences"] == gen.usage.sequences and cost["prompt_tokens"] == gen.usage.prompt_tokens
    assert cost["generated_tokens"] == gen.usage.generated_tokens > 0 and cost["records"] == 12
    assert "partial" not in cost and cost["datasets"]["gsm8k"]["calls"] == cost["calls"]
    assert first["seconds"] == cost["seconds"] == recorded_seconds(lines_of(tmp_path))
    saved = (tmp_path / "results.json").read_text()

    # The same command again: nothing generated, and not one number of the run changes.
    again = scripted()
    second = run_eval(again, {"gsm8k": MATH}, config(**budgets), tmp_path)
    assert again.calls == [] and again.usage.calls == 0
    assert second["usage"] == cost and second["seconds"] == first["seconds"]
    after = json.loads((tmp_path / "results.json").read_text())
    before = json.loads(saved)
    for k in ("usage", "seconds", "datasets", "average", "config", "prompts"):
        assert after[k] == before[k], k


@pytest.mark.parametrize("how", ["killed between chunks", "line cut mid-chunk"])
def test_a_resumed_run_costs_what_one_run_costs(tmp_path: Path, how: str) -> None:
    ref = run_eval(scripted(), {"gsm8k": MATH}, config(), tmp_path / "ref")["usage"]
    run = tmp_path / "run"
    if how == "killed between chunks":
        with pytest.raises(Killed):
            run_eval(DiesAfter(scripted(), 1), {"gsm8k": MATH}, config(), run)
        assert len(lines_of(run)) == 4  # the first chunk (one problem x 4 samples), then the kill
    else:
        run_eval(scripted(), {"gsm8k": MATH}, config(), run)
        path = run / "predictions" / "gsm8k.jsonl"
        text = path.read_text().splitlines()
        # As a kill while the last chunk was written leaves it: two of its lines whole, the third cut.
        path.write_text("\n".join(text[:10]) + "\n" + text[10][:25])
    gen = scripted()
    res = run_eval(gen, {"gsm8k": MATH}, config(), run)
    assert gen.calls, "the resume generated the missing chunks"
    cost, lines = res["usage"], lines_of(run)
    assert {k: cost[k] for k in EXACT} == {k: ref[k] for k in EXACT}
    assert cost["seconds"] == res["seconds"] == recorded_seconds(lines)
    assert "partial" not in cost
    # Every line carries its chunk's figures; a chunk sampled twice (cut mid-chunk) is still one chunk.
    assert sorted({x["call"]["batch"] for x in lines}) == [0, 1, 2]
    assert all(x["call"]["calls"] == 1 and x["call"]["records"] == 4 for x in lines)


def test_lines_of_an_older_toolkit_give_what_they_can(tmp_path: Path) -> None:
    full = run_eval(scripted(), {"gsm8k": MATH}, config(explore_budget=6), tmp_path)["usage"]
    path = tmp_path / "predictions" / "gsm8k.jsonl"
    lines = lines_of(tmp_path)
    old = [{k: v for k, v in x.items() if k != "call"} if x["index"] != 0 else x for x in lines]
    path.write_text("".join(json.dumps(x) + "\n" for x in old))
    cost = run_eval(scripted(), {"gsm8k": MATH}, config(explore_budget=6), tmp_path)["usage"]
    # Tokens are each line's own; chunks and calls follow from the data order and the two-phase setting.
    assert {k: cost[k] for k in ("records", "generated_tokens", "calls", "sequences")} == {
        k: full[k] for k in ("records", "generated_tokens", "calls", "sequences")
    }
    # Prompt tokens and seconds are known for the first problem's lines only: the cost says so.
    assert cost["partial"] == ["prompt_tokens", "seconds"] and cost["unmetered_records"] == 8
    assert cost["seconds"] == recorded_seconds(lines[:4]) and cost["prompt_tokens"] < full["prompt_tokens"]


def test_total_cost_counts_a_batch_once_and_shares_the_rest() -> None:
    a, b = batch_call(0, 2, 3, 6, 90, 1.5), batch_call(1, 2, 1, 2, 40, 0.25)
    recs = [{"t": 5, "call": a}, {"t": 7, "call": a}, {"t": 1, "call": a}, {"t": 4, "call": b}]
    cost = total_cost(recs, lambda r: r["t"])
    assert cost == {
        "records": 4,
        "generated_tokens": 17,
        "calls": 4,
        "sequences": 8,
        "prompt_tokens": 130,
        "seconds": 1.75,
    }
    # A batch whose lines came from two attempts (a kill cut it): still one batch's calls.
    retry = batch_call(0, 2, 3, 6, 90, 3.0)
    cut = total_cost([recs[0], recs[1], {"t": 1, "call": retry}, recs[3]], lambda r: r["t"])
    assert cut["calls"] == 4 and cut["sequences"] == 8 and cut["prompt_tokens"] == 130
    assert cut["seconds"] == round(1.5 * 2 / 3 + 3.0 / 3 + 0.25, 3)
    # Batches of the filter that differ in size are different batches.
    sized = [{"t": 1, "call": batch_call(0, 1, 1, 4, 8, 0.1, batch_size=n)} for n in (3, 5)]
    assert total_cost(sized, lambda r: r["t"])["calls"] == 2
    assert add_costs([cost, cut])["calls"] == 8 and "partial" not in add_costs([cost, cut])


# ------------------------------------------------------------------------------------- command line
def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "e2c.eval.run", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


@pytest.mark.slow  # two tiny-model evaluations into one folder (15 s or more on 2 cores)
def test_the_same_command_twice_into_one_folder_keeps_the_cost(bench_dir: Path, tmp_path: Path) -> None:
    """The second, empty process used to write its own meter (0 calls, 0 tokens)."""
    args = ["--model", "tiny", "--dataset", "gsm8k", "--data-dir", str(bench_dir), "--limit", "3"]
    args += ["--sample", "1", "--max-tokens", "16", "--backend", "hf", "--output-dir", str(tmp_path / "run")]
    args += ["--quiet"]
    first = cli(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    before = results_of(tmp_path / "run")
    cost = before["usage"]
    assert cost["calls"] == 1 and cost["sequences"] == 3 and cost["records"] == 3
    assert 0 < cost["generated_tokens"] <= 48 and cost["prompt_tokens"] > 0 and cost["seconds"] > 0
    assert cost["generated_tokens"] == sum(
        x["explore_tokens"] + x["execute_tokens"] for x in lines_of(tmp_path / "run")
    )
    second = cli(*args)
    assert second.returncode == 0, second.stderr[-2000:]
    after = results_of(tmp_path / "run")
    assert after["usage"] == cost and after["seconds"] == before["seconds"]
    assert f"{cost['generated_tokens']} generated tokens, 1 generation call, " in second.stdout
