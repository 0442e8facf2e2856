"""tts/run_tts.py end to end on the tiny model: every method, two budgets, outputs, resume, bad input."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2c.tts.run import read_done, record_key, summarize

ROOT = Path(__file__).resolve().parents[1]
SMALL = [
    "--set",
    "explore_budget=12",
    "--set",
    "execute_budget=16",
    "--set",
    "cot_tokens=24",
    "--set",
    "judge_tokens=4",
    "--set",
    "refine_tokens=8",
    "--set",
    "tree_step_tokens=6",
    "--set",
    "tree_branching=2",
    "--set",
    "tree_beam=1",
    "--set",
    "react_rounds=1",
]


def _run(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "tts/run_tts.py", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


def test_run_tts_tiny_all_methods_and_resume_cpu(tmp_path: Path, bench_dir: Path) -> None:
    args = [
        "--model",
        "tiny",
        "--backend",
        "hf",
        "--dataset",
        "gsm8k",
        "--data-dir",
        str(bench_dir),
        "--limit",
        "2",
        "--budgets",
        "1",
        "2",
        "--output-dir",
        str(tmp_path),
        *SMALL,
    ]
    res = _run(args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    last = json.loads(res.stdout.strip().splitlines()[-1])
    rows = last["summary"]
    assert len(rows) == 10 * 2  # every method at both budgets
    assert {r["method"] for r in rows} == {
        "greedy_cot",
        "self_consistency",
        "e2c_sc",
        "e2c_rp",
        "e2c_select_lm_judge",
        "e2c_select_semantic_cluster",
        "e2c_react_loop",
        "e2c_tot",
        "tree_of_thoughts",
        "forest_of_thought",
    }
    assert all(r["problems"] == 2 and r["tokens_k"] > 0 for r in rows)
    by = {(r["method"], r["budget"]): r for r in rows}
    # self-consistency samples N whole chains: twice the chains at N=2 (each at most cot_tokens).
    assert by[("self_consistency", 2)]["tokens_k"] <= 2 * 2 * 24 / 1000 + 1e-9
    assert by[("e2c_rp", 1)]["tokens_k"] <= (12 + 16) / 1000 + 1e-9
    out = Path(last["results"]).parent
    assert (out / "accuracy_vs_tokens.png").stat().st_size > 1000
    with (out / "results.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 20
    assert len(read_done(out / "records.jsonl")) == 40
    # A rerun with the same settings finds every result and generates nothing.
    again = _run(args, timeout=300)
    assert again.returncode == 0 and "40/40 results already" in again.stdout
    assert json.loads(again.stdout.strip().splitlines()[-1])["summary"] == rows
    # Other settings in the same folder are refused rather than mixed in.
    other = _run([*args, "--set", "temperature=0.5"], timeout=300)
    assert (
        other.returncode == 2
        and "holds a run with other settings (settings.temperature 0.9 -> 0.5)" in other.stderr
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--methods", "beam_search"], "unknown TTS method(s) beam_search; valid: e2c_react_loop"),
        (["--set", "explore_steps=3"], "unknown TTS setting(s) explore_steps; valid:"),
        (["--set", "oops"], "expected KEY=VALUE"),
        (["--budgets", "0"], "budgets must be positive integers"),
        (["--dataset", "aime2099"], "aime2099"),
    ],
)
def test_run_tts_bad_input_cpu(tmp_path: Path, extra: list[str], message: str) -> None:
    res = _run(["--model", "tiny", "--backend", "hf", "--output-dir", str(tmp_path), *extra], timeout=120)
    assert res.returncode == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing written


def test_summary_and_resume_keys_cpu(tmp_path: Path) -> None:
    recs = [
        {
            "method": "m",
            "budget": 2,
            "problem_id": "a",
            "correct": True,
            "generated_tokens": 1000,
            "prompt_tokens": 50,
            "calls": 2,
            "seconds": 1.0,
        },
        {
            "method": "m",
            "budget": 2,
            "problem_id": "b",
            "correct": False,
            "generated_tokens": 3000,
            "prompt_tokens": 150,
            "calls": 4,
            "seconds": 3.0,
        },
    ]
    (row,) = summarize(recs)
    assert row == {
        "method": "m",
        "budget": 2,
        "problems": 2,
        "accuracy": 0.5,
        "tokens_k": 2.0,
        "prompt_tokens_k": 0.1,
        "calls": 3.0,
        "seconds": 2.0,
    }
    p = tmp_path / "records.jsonl"
    p.write_text(json.dumps(recs[0]) + "\n" + '{"method": "m", "bud')  # a line cut by a kill
    assert list(read_done(p)) == [record_key("m", 2, "a")]


@pytest.mark.slow
def test_run_tts_embedded_small_slow(tmp_path: Path, bench_dir: Path) -> None:
    """The embedded SmolLM2 through three methods at K/N=2 on one GSM8K problem (about a minute)."""
    args = [
        "--model",
        "embedded",
        "--backend",
        "hf",
        "--dataset",
        "gsm8k",
        "--data-dir",
        str(bench_dir),
        "--limit",
        "1",
        "--budgets",
        "2",
        "--output-dir",
        str(tmp_path),
        "--methods",
        "self_consistency",
        "e2c_sc",
        "e2c_select_lm_judge",
        "--set",
        "explore_tokens=48",
        "--set",
        "execute_tokens=96",
        "--set",
        "cot_tokens=144",
    ]
    res = _run(args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = {r["method"]: r for r in json.loads(res.stdout.strip().splitlines()[-1])["summary"]}
    assert set(rows) == {"self_consistency", "e2c_sc", "e2c_select_lm_judge"}
    assert 0 < rows["e2c_sc"]["tokens_k"] <= 2 * (48 + 96) / 1000
    assert 0 < rows["self_consistency"]["tokens_k"] <= 2 * 144 / 1000


def test_budget_free_method_runs_once_per_problem_cpu(tmp_path: Path) -> None:
    from e2c.data.registry import Record
    from e2c.generation.scripted import ScriptedGenerator
    from e2c.tts import TTSSettings
    from e2c.tts.run import run_tts

    gen = ScriptedGenerator(lambda prompt, j: "plan</EXPLORATION><EXECUTION>\\boxed{12}</EXECUTION>")
    recs = [
        Record(id=f"q{i}", problem=f"What is {i} + 12 - {i}?", answer="12", kind="math") for i in range(2)
    ]
    rows = run_tts(
        gen,
        recs,
        ["greedy_cot"],
        [1, 4, 8],
        TTSSettings(cot_tokens=20),
        tmp_path,
        {"t": 1},
        log=lambda _m: None,
    )
    assert len(gen.calls) == 2  # one greedy chain per problem, reused at every budget
    assert [(r["budget"], r["accuracy"]) for r in rows] == [(1, 1.0), (4, 1.0), (8, 1.0)]
    assert rows[0]["tokens_k"] == rows[2]["tokens_k"] > 0
