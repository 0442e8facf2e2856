"""The reproduction's report (``e2c.study.reproduce_report``): unit times from the run folder's files, the paired
sentences and the rendered sections, on hand-made folders and numbers."""

from __future__ import annotations

import json
from pathlib import Path

from e2c.study.reproduce import result_section
from e2c.study.reproduce_report import attempt_count, difference_line, render, stage_totals, unit_times


def _done(folder: Path, unit: str, kind: str, seconds: float, at: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "DONE.json").write_text(
        json.dumps({"unit": unit, "kind": kind, "seconds": seconds, "finished_at": at})
    )


def test_unit_times_reads_each_units_done_file_in_finishing_order_cpu(tmp_path: Path) -> None:
    _done(tmp_path / "data", "data", "data", 30.0, "2026-12-07 18:00:00")
    _done(tmp_path / "arms/rl/seed0", "arms/rl/seed0", "rl", 2000.0, "2026-12-07 20:00:00")
    _done(tmp_path / "arms/sft120/seed0", "arms/sft120/seed0", "sft", 2300.0, "2026-12-07 19:00:00")
    (tmp_path / "arms/sft120/seed0/attempts.json").write_text("[239.6, 105.3]")
    # a stage's own DONE file inside a unit names another folder (or none): not a unit
    _done(tmp_path / "arms/rl/seed0/inner", "arms/rl/seed0", "rl", 5.0, "2026-12-07 20:00:01")
    (tmp_path / "filters").mkdir()
    (tmp_path / "filters/DONE.json").write_text("not json")
    rows = unit_times(tmp_path)
    assert [r["unit"] for r in rows] == ["data", "arms/sft120/seed0", "arms/rl/seed0"]
    assert [r["attempts"] for r in rows] == [1, 3, 1]
    assert [r["stage"] for r in rows] == ["data", "SFT training", "RL training"]
    assert stage_totals(rows) == {"data": 30.0, "SFT training": 2300.0, "RL training": 2000.0}


def test_attempt_count_of_a_damaged_attempts_file_is_one_run_cpu(tmp_path: Path) -> None:
    assert attempt_count(tmp_path) == 1
    (tmp_path / "attempts.json").write_text("{")
    assert attempt_count(tmp_path) == 1
    (tmp_path / "attempts.json").write_text('{"a": 1}')
    assert attempt_count(tmp_path) == 1


def _comparison(mean: float, se: float, ci: list[float], word: str, metric: str = "avg") -> dict:
    return {
        "arm": "rl", "against": "sft120", "metric": metric, "mean": mean, "se": se, "ci": ci, "word": word,
        "rose": 40, "fell": 25, "problems": 300, "seeds": [0], "by_family": {},
    }  # fmt: skip


def test_difference_line_states_the_difference_se_interval_and_verdict_cpu() -> None:
    labels = {"rl": "RL", "sft120": "SFT"}
    line = difference_line(_comparison(0.023, 0.007, [0.01, 0.037], "gain"), labels, "avg@4 at T 1")
    assert "RL - SFT, avg@4 at T 1: **+2.3 points** (SE 0.7, more than two standard errors" in line
    assert "95% CI [+1.0, +3.7]) on 300 held-out problems and 1 training seed;" in line
    assert "40 problems rose, 25 fell" in line and '"RL is better": **gain**' in line
    line = difference_line(_comparison(-0.01, 0.011, [-0.031, 0.012], "unresolved"), labels, "greedy")
    assert "**-1.0 points** (SE 1.1, within two standard errors" in line


def test_a_control_kept_from_an_earlier_run_is_left_out_when_not_confirmed_cpu(tmp_path: Path) -> None:
    from e2c.study.reproduce_report import collect

    phase = {"avg": None, "greedy": None, "pass_at_k": None, "format_rate": None, "by_family": {}}
    arm = {"seeds": [0], "training": {"0": None}, "confirm": phase}
    study_rep = {
        "study": "reproduce", "file": "f", "fast": True, "base": {}, "options": {}, "protocol": {},
        "arms": {"sft120": {**arm, "start": "base"}, "rl": {**arm, "start": "sft120"}, "control": arm},
        "selection": {"confirmed": ["sft120", "rl"]},
        "comparisons": {"confirm": [
            _comparison(0.01, 0.01, [-0.01, 0.03], "unresolved"),
            {**_comparison(0.02, 0.01, [0.0, 0.04], "gain"), "against": "control"},
        ]},
    }  # fmt: skip
    rep = collect(tmp_path, study_rep, "rl", "control")
    assert rep["labels"] == {"sft120": "SFT", "rl": "RL"}
    assert [c["against"] for c in rep["comparisons"]] == ["sft120"]


def test_render_has_every_section_and_result_section_cuts_it_cpu() -> None:
    model = {
        "avg": {"mean": 0.1, "ci": [0.08, 0.12], "problems": 300},
        "greedy": {"mean": 0.25, "ci": [0.2, 0.3], "problems": 300},
        "format_rate": 0.4, "format_rate_of": "sampled", "greedy_format_rate": 0.9,
        "pass_at_k": {"1": 0.1, "2": 0.15}, "by_family": {"code/L1": {"mean": 0.0, "problems": 42}},
    }  # fmt: skip
    rep = {
        "system": {"date": "2026-12-07", "cpu": "cpu", "cores": 2, "torch_threads": 2, "git_commit": "abc"},
        "study": {
            "file": "configs/study/reproduce.toml", "fast": False, "base": {"model": "embedded"},
            "options": {"delta": 0.02}, "protocol": {"samples": 2, "temperature": 1.0, "max_tokens": 320},
        },
        "labels": {"sft120": "SFT", "rl": "RL"},
        "models": {"sft120": {"label": "SFT", **model}, "rl": {"label": "RL", **model}},
        "comparisons": [_comparison(0.0, 0.01, [-0.02, 0.02], "unresolved")],
        "training": {"sft120": {"0": {"steps": 120, "signal": "loss", "train": [2.4, 0.7], "weight_rel_l2": 0.009}}},
        "rl": {"health": None, "curve": []},
        "times": [{"unit": "data", "kind": "data", "seconds": 30.0, "attempts": 1, "finished_at": "x"}],
        "stage_seconds": {"data": 30.0},
        "total_seconds": 30.0,
        "pages": {},
    }  # fmt: skip
    md = render(rep, {"pass_at_k.png": "report/pass_at_k.png", "sft_loss.png": None})
    for section in ("## Result", "## pass@k", "## By task family", "## Training", "## Time per stage"):
        assert section in md, section
    assert "| SFT (`sft120`) | 10.0% [8.0, 12.0] | 40% | 25.0% [20.0, 30.0] | 90% |" in md
    assert "| code/L1 | 42 | 0.0% | 0.0% |\n" in md  # no difference column without a per-family difference
    assert "![pass@k](report/pass_at_k.png)" in md and "sft_loss" not in md
    cut = result_section(md)
    assert cut.startswith("## Result") and "## pass@k" not in cut and "RL - SFT, avg@2 at T 1" in cut
