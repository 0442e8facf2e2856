"""``python -m e2c.eval.compare`` over real (scripted-backend) evaluation runs: the side-by-side table, the
paired differences against the first run, the plots, and the one-line errors; plots beside a run's
``results.json`` when it holds several datasets."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from e2c.core.stats import wilson_interval
from e2c.data.registry import Record
from e2c.eval.compare import compare_runs, format_comparison, per_problem_scores, run_summary
from e2c.eval.runner import EvalConfig, run_eval
from e2c.generation.scripted import ScriptedGenerator


def chain(answer: str) -> str:
    return f"Plan: compute.</EXPLORATION><EXECUTION> so \\boxed{{{answer}}}</EXECUTION>"


MATH = [
    Record("q-a", "What is 2+3?", "5", "math"),
    Record("q-b", "What is 10/4?", "2.5", "math"),
    Record("q-c", "What is 7*6?", "42", "math"),
]
MED = [Record("m-a", "Which organ pumps blood?", "B", "mcq", ["Liver", "Heart", "Lung", "Skin"])]
# Run "before": 2+3 right twice, 10/4 once, 7*6 never; run "after": 10/4 and 7*6 right too.
BEFORE = {
    "2+3": [chain("5"), chain("5")],
    "10/4": [chain("2.5"), chain("2")],
    "7*6": [chain("41"), chain("40")],
    "organ": [chain("B"), chain("A")],
}
AFTER = {**BEFORE, "10/4": [chain("2.5"), chain("5/2")], "7*6": [chain("42"), chain("41")]}


def run(responses: dict, out: Path, datasets: dict) -> Path:
    cfg = EvalConfig(model="scripted", samples=2, max_tokens=200, chunk_size=4, backend="scripted")
    run_eval(ScriptedGenerator.from_responses(responses), datasets, cfg, out)
    return out


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    both = {"gsm8k": MATH, "medqa": MED}
    return run(BEFORE, tmp_path / "before", both), run(AFTER, tmp_path / "after", {"gsm8k": MATH})


def test_summary_and_paired_difference_from_the_files(runs) -> None:
    before, after = runs
    assert per_problem_scores(before / "predictions" / "gsm8k.jsonl") == {"q-a": 1.0, "q-b": 0.5, "q-c": 0.0}
    s = run_summary(before)["gsm8k"]
    assert math.isclose(s["accuracy"], 0.5) and s["correct"] == 2 and s["problems"] == 3
    assert s["ci95"] == list(wilson_interval(2, 3))
    cmp = compare_runs([before, after], ["before", "after"])
    d = cmp["paired_vs_first"]["gsm8k"]["after"]
    # Per-problem differences 0, +0.5, +0.5: mean 1/3, sample sd 0.2887, SE sd/sqrt(3).
    assert d["n"] == 3 and math.isclose(d["mean"], 1 / 3)
    assert math.isclose(d["se"], math.sqrt(((1 / 3) ** 2 + 2 * (1 / 6) ** 2) / 2 / 3))
    assert "medqa" not in cmp["paired_vs_first"]  # the second run has no medqa
    table = format_comparison(cmp)
    assert "== gsm8k" in table and "== medqa" in table
    assert any(row.startswith("after") and "(not evaluated)" in row for row in table.splitlines())
    assert "+33.3 (SE 16.7)" in table


def test_cli_prints_table_json_and_plots(runs, tmp_path: Path) -> None:
    before, after = runs
    plots = tmp_path / "plots"
    argv = [str(before), str(after), "--labels", "B", "A", "--plot-dir", str(plots)]
    proc = subprocess.run(
        [sys.executable, "-m", "e2c.eval.compare", *argv],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert list(out["runs"]) == ["B", "A"] and out["first"] == "B"
    for name in ("accuracy.png", "tokens.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_with_several_datasets_gets_plots_beside_its_results(runs) -> None:
    before, after = runs
    assert (before / "accuracy.png").stat().st_size > 1000 and (before / "tokens.png").exists()
    assert not (after / "accuracy.png").exists()  # one dataset: nothing to set side by side


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}"], "no such run folder"),
        (["{empty}"], "no results.json (not an evaluation run, or not finished)"),
        (["{before}", "{before}"], "run names must differ"),
        (["{before}", "--labels", "x", "y"], "--labels gives 2 names for 1 runs"),
        (["{broken}"], "not an evaluation results file"),
    ],
)
def test_bad_input_is_one_line(runs, tmp_path: Path, args, message) -> None:
    before, _ = runs
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.json").write_text("{not json")
    paths = {"missing": tmp_path / "nope", "empty": tmp_path / "empty", "before": before}
    paths["broken"] = tmp_path / "broken"
    argv = [a.format(**paths) for a in args]
    proc = subprocess.run([sys.executable, "-m", "e2c.eval.compare", *argv], capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
