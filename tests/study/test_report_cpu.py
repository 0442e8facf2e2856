"""The study's report, from a fabricated run (:mod:`study_fixture`), against a plain reading of the files
the units wrote: each accuracy, each paired difference and its per-family parts, each verdict, each
training curve's first and last values."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from entry_fuzz import call_main
from study_fixture import FAMILIES, STUDY, fabricate_work, write_study

from e2c.claims import stats as st
from e2c.study.cli import main
from e2c.study.report import WORD, first_last, render


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict]:
    fabricate_work(monkeypatch)
    path = write_study(tmp_path)
    out = tmp_path / "out"
    o = call_main(main, ["--study", str(path), "--out", str(out)], {})
    assert o.code == 0, o.stderr[-2000:]
    return out, json.loads((out / "study.json").read_text())


def plain_scores(out: Path, arm: str, seed: int, phase: str, how: str) -> dict[str, float]:
    """{problem: share of right samples}, read line by line."""
    right: dict[str, list[int]] = {}
    for line in (
        (out / f"arms/{arm}/seed{seed}/{phase}/{how}/predictions/synthetic.jsonl").read_text().splitlines()
    ):
        row = json.loads(line)
        right.setdefault(row["id"], []).append(int(row["correct"]))
    return {k: sum(v) / len(v) for k, v in right.items()}


@pytest.mark.parametrize("phase", ["screen", "confirm"])
def test_differences_match_a_plain_loop_cpu(run, phase: str) -> None:
    out, rep = run
    fam_file = out / ("validation/families.json" if phase == "screen" else "data/eval_families.json")
    fams = json.loads(fam_file.read_text())
    comps = {(c["arm"], c["against"], c["metric"]): c for c in rep["comparisons"][phase]}
    if phase == "confirm":
        assert set(comps) == {("rl", b, m) for b in ("sft", "rl_sft") for m in ("avg", "greedy")}
    else:  # every arm against its start, the RL arm against its continuation
        assert {(a, b) for a, b, _ in comps} == {("rl", "sft"), ("rl", "rl_sft"), ("rl_sft", "sft")}
    for (arm, other, metric), c in comps.items():
        how = "sampled" if metric == "avg" else "greedy"
        diffs, per_family = [], {}
        for seed in (0, 1):
            a, b = plain_scores(out, arm, seed, phase, how), plain_scores(out, other, seed, phase, how)
            for pid in a:
                diffs.append(a[pid] - b[pid])
                per_family.setdefault(fams[pid], []).append(a[pid] - b[pid])
        assert c["mean"] == pytest.approx(statistics.fmean(diffs))
        assert c["ci"][0] <= c["mean"] <= c["ci"][1] and c["seeds"] == [0, 1]
        assert c["word"] == WORD[st.verdict(c["ci"], rep["options"]["delta"])]
        assert set(c["by_family"]) == set(FAMILIES)
        for f, d in c["by_family"].items():
            assert d["mean"] == pytest.approx(statistics.fmean(per_family[f]))


def test_arm_accuracies_and_training_curves_cpu(run) -> None:
    out, rep = run
    for arm, a in rep["arms"].items():
        for phase in ("screen", "confirm"):
            if a[phase] is None:
                continue
            done = [
                json.loads((out / f"arms/{arm}/seed{s}/{phase}/sampled/DONE.json").read_text())
                for s in (0, 1)
            ]
            assert a[phase]["avg"]["mean"] == pytest.approx(statistics.fmean(d["pass@1"] for d in done))
            assert a[phase]["format_rate"] == pytest.approx(0.75)
            lo, hi = a[phase]["avg"]["ci"]
            assert lo <= a[phase]["avg"]["mean"] <= hi and hi - lo >= 3 / a[phase]["avg"]["problems"]
    rl = rep["arms"]["rl"]["training"]["0"]
    assert rl["train"] == pytest.approx([0.1, 0.2]) and rl["well_formed"] == pytest.approx([0.6, 0.7])
    assert rl["entropy"] == pytest.approx([0.25, 0.2]) and rl["steps"] == 2
    assert rl["weight_rel_l2"] == 0.01
    sft = rep["arms"]["sft"]["training"]["1"]
    assert sft["signal"] == "loss" and sft["train"] == [2.0, 1.5]
    assert rep["selection"] == {
        "chosen": ["rl"],
        "how": "the best avg@k on the screening split",
        "confirmed": ["sft", "rl", "rl_sft"],
    }


def test_the_markdown_shows_every_arm_comparison_and_verdict_cpu(run) -> None:
    out, rep = run
    md = (out / "study.md").read_text()
    assert md == render(rep)
    for head in (
        "## Arms",
        "## Screening (validation split)",
        "## Confirmation (held-out set)",
        "By task family",
    ):
        assert head in md
    for arm in rep["arms"]:
        assert f"| {arm} |" in md
    for c in rep["comparisons"]["confirm"]:
        assert f"**{c['word']}**" in md
    assert "reward 0.100 → 0.200" in md and "loss 2.000 → 1.500" in md


def test_screen_only_writes_a_report_without_confirmation_cpu(tmp_path: Path, monkeypatch) -> None:
    calls = fabricate_work(monkeypatch)
    path = write_study(tmp_path, STUDY)
    o = call_main(main, ["--study", str(path), "--out", str(tmp_path / "o"), "--screen-only"], {})
    assert o.code == 0, o.stderr[-2000:]
    assert not any("/confirm/" in k for k in calls)
    rep = json.loads((tmp_path / "o" / "study.json").read_text())
    assert rep["comparisons"]["confirm"] == [] and rep["selection"]["confirmed"] == []
    assert "No confirmation was run" in (tmp_path / "o" / "study.md").read_text()


def test_first_last_cpu() -> None:
    assert first_last([]) is None and first_last([1, None, 3.0]) == [1.0, 3.0]
