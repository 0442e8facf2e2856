"""The README's quickstart and reproduction sections are rendered from the kept reports
(``docs/runs/quickstart/report.json``, ``docs/runs/reproduce/report.json``) by ``python -m e2c.quickstart.readme``:
the README holds exactly what the renderer writes, and its "no harm" verdict follows the rule it states."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2c.core.errors import UserError
from e2c.quickstart.readme import (
    BEGIN,
    END,
    KEPT,
    REPRO_BEGIN,
    REPRO_END,
    REPRO_KEPT,
    no_harm,
    render,
    render_reproduction,
    replace_section,
)

ROOT = Path(__file__).resolve().parents[2]


def _kept() -> dict:
    return json.loads((ROOT / KEPT).read_text())


def test_the_readme_holds_the_section_rendered_from_the_kept_report_cpu() -> None:
    readme = (ROOT / "README.md").read_text()
    assert readme.count(BEGIN) == 1 and readme.count(END) == 1
    section = readme[readme.index(BEGIN) : readme.index(END) + len(END)]
    assert section == render(_kept()), "README.md is stale: run python -m e2c.quickstart.readme --write"
    rep = _kept()
    assert rep["config"]["fast"] is False and rep["config"]["model"] == "embedded"  # a default run
    assert (ROOT / KEPT).with_name("report.md").is_file()


def test_the_readme_holds_the_reproduction_rendered_from_its_kept_report_cpu() -> None:
    readme = (ROOT / "README.md").read_text()
    assert readme.count(REPRO_BEGIN) == 1 and readme.count(REPRO_END) == 1
    section = readme[readme.index(REPRO_BEGIN) : readme.index(REPRO_END) + len(REPRO_END)]
    rep = json.loads((ROOT / REPRO_KEPT).read_text())
    assert section == render_reproduction(rep), (
        "README.md is stale: run python -m e2c.quickstart.readme --write"
    )
    assert rep["study"]["fast"] is False and rep["study"]["base"]["model"] == "embedded"  # the real run
    assert rep["study"]["protocol"]["samples"] >= 4 and rep["study"]["protocol"]["confirm_problems"] == 300
    avg = next(c for c in rep["comparisons"] if c["against"] == "sft120" and c["metric"] == "avg")
    assert avg["problems"] == 300 and f"SE {100 * avg['se']:.1f}" in section  # RL - SFT with its paired SE
    assert (ROOT / REPRO_KEPT).with_name("report.md").is_file()


def test_a_readme_section_is_replaced_between_its_own_markers_cpu() -> None:
    text = f"a\n{BEGIN}\nq\n{END}\nb\n{REPRO_BEGIN}\nr\n{REPRO_END}\nc"
    out = replace_section(replace_section(text, "Q"), "R", REPRO_BEGIN, REPRO_END)
    assert out == "a\nQ\nb\nR\nc"
    with pytest.raises(UserError, match="no reproduction section"):
        replace_section("# README\n", "x", REPRO_BEGIN, REPRO_END)


def _diff(mean: float, se: float) -> dict:
    return {"n": 300, "mean": mean, "se": se, "improved": 1, "worsened": 1, "sampled": False}


def _report(avg: tuple[float, float], greedy: tuple[float, float], formats: tuple[float, float]) -> dict:
    rep = copy.deepcopy(_kept())
    rep["sampled_differences"]["rl_minus_sft"]["synthetic"] = _diff(*avg)
    rep["differences"]["rl_minus_sft"]["synthetic"] = _diff(*greedy)
    rep["eval"]["eval_sft"]["synthetic"]["format_rate"] = formats[0]
    rep["eval"]["eval_rl"]["synthetic"]["format_rate"] = formats[1]
    return rep


@pytest.mark.parametrize(
    ("avg", "greedy", "formats", "ok", "why"),
    [
        ((-0.02, 0.01), (0.0, 0.02), (0.86, 0.81), True, []),  # exactly -2 SE and -5 points: no harm
        ((-0.021, 0.01), (0.0, 0.02), (0.86, 0.86), False, ["avg@k fell by more than 2 SE"]),
        ((0.01, 0.01), (-0.11, 0.021), (0.86, 0.74), False, ["greedy", "well-formedness"]),
        ((0.05, 0.01), (0.05, 0.01), (0.86, 0.80), False, ["well-formedness"]),
    ],
)
def test_no_harm_is_two_standard_errors_and_five_points_of_format_cpu(avg, greedy, formats, ok, why) -> None:
    got, failed = no_harm(_report(avg, greedy, formats))
    assert got is ok and len(failed) == len(why)
    for word, line in zip(why, failed, strict=True):
        assert word in line
    text = render(_report(avg, greedy, formats))
    assert ("**RL did no harm**" in text) is ok and ("**RL did harm**" in text) is not ok


def test_a_run_without_rl_is_not_called_harmless_cpu() -> None:
    rep = copy.deepcopy(_kept())
    rep["sampled_differences"]["rl_minus_sft"]["synthetic"] = None
    rep["differences"]["rl_minus_sft"]["synthetic"] = None
    rep["eval"]["eval_rl"] = None
    text = render(rep)
    assert "**RL was not compared with SFT**" in text and "did no harm" not in text


def test_a_readme_without_markers_is_refused_in_one_line_cpu() -> None:
    with pytest.raises(UserError, match="no quickstart section"):
        replace_section("# README\n", "x")
    assert replace_section(f"a\n{BEGIN}\nold\n{END}\nb", "new") == "a\nnew\nb"


def test_a_file_that_is_not_a_report_is_one_line_cpu(tmp_path: Path) -> None:
    bad = tmp_path / "r.json"
    bad.write_text('{"config": {}}')
    proc = subprocess.run(
        [sys.executable, "-m", "e2c.quickstart.readme", "--report", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: {bad} is not a quickstart report.json (KeyError: 'system')"
    ]
