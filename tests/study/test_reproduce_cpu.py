"""``e2c reproduce``: the study engine on ``configs/study/reproduce.toml``, confirming the RL arm against its
SFT start without screening; its runs default to ``$E2C_BASE_DIR/reproduce`` when that is set."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from process_tree import alive, descendants

from e2c.core.paths import BASE_DIR_ENV, configs_dir
from e2c.study.reproduce import CONTROL_ARM, RL_ARM, STUDY_FILE, ReproduceSettings, study_argv
from e2c.study.spec import SFT_KEYS, load_study

ROOT = Path(__file__).resolve().parents[2]


def test_the_study_file_is_the_recipe_that_learned_cpu() -> None:
    """The reproduction's RL arm is the study's rl_signal_lr2e-5_from_sft120, setting for setting."""
    rep = load_study(configs_dir() / STUDY_FILE, fast=False)
    recipe = load_study(configs_dir() / "study" / "rl_recipe.toml", fast=False)
    mine, theirs = rep.arms[RL_ARM], recipe.arms["rl_signal_lr2e-5_from_sft120"]
    assert mine.cfg == theirs.cfg
    a, b = rep.arms[mine.start].cfg, recipe.arms[theirs.start].cfg  # sft120 = sft120, as SFT goes
    assert {k: getattr(a, k) for k in SFT_KEYS} == {k: getattr(b, k) for k in SFT_KEYS}
    assert (a.model, a.seed, a.sft_steps) == (b.model, b.seed, 120)
    assert (mine.cfg.rl_lr, mine.cfg.rl_steps, mine.cfg.rl_batch, mine.cfg.rl_n) == (2e-5, 24, 4, 8)
    assert mine.cfg.rl_families == ("small_arithmetic", "code") and mine.cfg.eval_samples == 4


def test_the_command_is_the_study_confirming_rl_without_screening_cpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(BASE_DIR_ENV, raising=False)
    argv = study_argv(ReproduceSettings())
    assert argv[:2] == ["--study", str(configs_dir() / STUDY_FILE)]
    assert argv[2:] == [
        "--out",
        "outputs/reproduce",
        "--arms",
        RL_ARM,
        "--skip-screening",
        "--confirm",
        RL_ARM,
    ]
    assert study_argv(ReproduceSettings(with_control=True))[5] == f"{RL_ARM},{CONTROL_ARM}"
    monkeypatch.setenv(BASE_DIR_ENV, str(tmp_path))
    argv = study_argv(ReproduceSettings(fast=True, seeds=(1, 2), force=True, dry_run=True))
    assert argv[3] == str(tmp_path / "reproduce-fast")
    assert argv[-6:] == ["--fast", "--seeds", "1", "2", "--force", "--dry-run"]
    assert study_argv(ReproduceSettings(out="mine"))[3] == "mine"


def test_dry_run_prints_the_plan_and_writes_nothing_cpu(tmp_path: Path) -> None:
    env = {**os.environ, BASE_DIR_ENV: str(tmp_path / "base")}
    proc = subprocess.run(
        [sys.executable, "-m", "e2c.study.reproduce", "--fast", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert str(tmp_path / "base" / "reproduce-fast") in proc.stdout
    assert "arms/rl/seed0" in proc.stdout and "screen" not in proc.stdout.replace("screening", "")
    assert not (tmp_path / "base").exists()


def test_a_wrong_flag_is_one_line_cpu() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "e2c.study.reproduce", "--seeds", "x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) <= 2, proc.stderr
    assert "--seeds" in proc.stderr


@pytest.mark.slow
def test_reproduce_fast_end_to_end_and_found_again_through_the_base_folder_slow(tmp_path: Path) -> None:
    """The whole reproduction on the tiny model; then, from another working directory with E2C_BASE_DIR
    pointed at it, the same command trains nothing and reports the same comparison."""
    base = tmp_path / "base"
    env = {**os.environ, BASE_DIR_ENV: str(base), "E2C_HOME": str(ROOT)}

    def run(cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "e2c.study.reproduce", "--fast"],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=3600,
        )

    first = run(ROOT)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    out = base / "reproduce-fast"
    summary = json.loads(first.stdout.strip().splitlines()[-1])
    assert summary["report"] == str(out / "report.md") and summary["json"] == str(out / "report.json")
    assert set(summary["differences"]) == {f"{RL_ARM} - sft120 (avg)", f"{RL_ARM} - sft120 (greedy)"}
    assert (
        "## Result" in first.stdout and "RL - SFT, avg@2 at T 1:" in first.stdout
    )  # printed, not only written
    report = json.loads((out / "report.json").read_text())
    assert report["labels"] == {"sft120": "SFT", RL_ARM: "RL"}
    assert [r["unit"] for r in report["times"]][:3] == ["data", "validation", "arms/sft120/seed0"]
    assert len(report["times"]) == 9 and report["total_seconds"] == pytest.approx(
        sum(r["seconds"] for r in report["times"])
    )
    assert report["rl"]["health"]["rows"] and report["sft_losses"]
    md = (out / "report.md").read_text()
    for section in (
        "## Result",
        "## pass@k",
        "## By task family",
        "## Training",
        "### RL health",
        "## Time per stage",
        "## Pages",
    ):
        assert section in md, section
    for png in ("pass_at_k.png", "rl_reward.png", "sft_loss.png", "rl_health.png"):
        assert (out / "report" / png).is_file() and f"(report/{png})" in md, png
    rep = json.loads((out / "study.json").read_text())
    assert rep["selection"]["confirmed"] == ["sft120", RL_ARM]
    pairs = {(c["arm"], c["against"], c["metric"]) for c in rep["comparisons"]["confirm"]}
    assert pairs == {(RL_ARM, "sft120", "avg"), (RL_ARM, "sft120", "greedy")}
    for c in rep["comparisons"]["confirm"]:
        assert c["ci"][0] <= c["mean"] <= c["ci"][1]
    assert not list(out.glob("arms/*/seed*/screen"))  # nothing screened
    page = rep["pages"]["view-sft120-vs-rl.html"]  # the chain viewer: RL against SFT on the held-out set
    assert page["path"] == "pages/view-sft120-vs-rl.html" and (out / page["path"]).is_file(), page
    assert set(rep["arms"]["rl"]["confirm"]["pass_at_k"]) == {"1", "2"}  # --fast: 2 samples

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = run(elsewhere)
    assert again.returncode == 0, again.stderr[-2000:]
    # every unit (data, validation, the filter, sft120, rl, greedy and avg@k of both) kept, none run again
    assert again.stdout.count("complete from an earlier run") == 9
    assert json.loads((out / "study.json").read_text())["comparisons"] == rep["comparisons"]
    assert json.loads(again.stdout.strip().splitlines()[-1])["differences"] == summary["differences"]
    assert "## Result" in again.stdout  # the report, printed again without training
    assert not (elsewhere / "outputs").exists()
    # a checkout whose settings differ from the kept runs' (here another benchmark folder) is refused in one line
    (tmp_path / "other-benchmarks").mkdir()
    other = subprocess.run(
        [sys.executable, "-m", "e2c.study.reproduce", "--fast"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env={**env, "E2C_BENCH_DIR": str(tmp_path / "other-benchmarks")},
        timeout=600,
    )
    assert other.returncode == 2 and len(other.stderr.strip().splitlines()) == 1, other.stderr
    assert "data finished with other settings (bench_dir" in other.stderr
    assert json.loads((out / "report.json").read_text())["times"] == report["times"]  # nothing redone

    # A SIGTERM during RL (after its step's checkpoint), then the same command: the RL unit resumes from that
    # checkpoint and the finished report matches the uninterrupted one in settings and record counts.
    killed = base / "killed"  # the finished run less its RL arm (SFT's evaluations kept: they are not redone)
    shutil.copytree(out, killed, ignore=shutil.ignore_patterns("report*", "study.*", "pages"))
    shutil.rmtree(killed / "arms" / RL_ARM)
    log = (tmp_path / "killed.log").open("w")
    cmd = [sys.executable, "-m", "e2c.study.reproduce", "--fast", "--out", str(killed)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    rl_dir = killed / "arms" / RL_ARM / "seed0"
    # verl logs a step after it saves the step's checkpoint: wait for both (a kill between the two trains the
    # step again, e2c.launch.checkpoints.rewind_unlogged)
    deadline = time.monotonic() + 900
    while not ((rl_dir / "latest_checkpointed_iteration.txt").is_file() and _steps(rl_dir / "metrics.jsonl")):
        assert proc.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "no RL step within 15 minutes"
        time.sleep(0.05)
    run_pids = descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=300)
    log.close()
    text = (tmp_path / "killed.log").read_text()
    assert rc == 143 and "interrupted (SIGTERM)" in text and "rerun with:" in text, text[-3000:]
    assert not (killed / "arms" / RL_ARM / "seed0" / "DONE.json").exists(), (
        "the RL unit ended before the kill"
    )
    time.sleep(2)
    assert not [p for p in run_pids if alive(p)]
    resumed = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=3600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"resuming the interrupted run in {killed / 'arms' / RL_ARM / 'seed0'}" in resumed.stdout
    assert resumed.stdout.count("complete from an earlier run") == 6  # all but RL and its two evaluations
    # its one step was checkpointed and logged: the launcher trains nothing (verl alone would train a step 2)
    assert "holds step 1 of 1: nothing left to train" in (rl_dir / "log.txt").read_text()
    assert _steps(rl_dir / "metrics.jsonl") == [1] and not (rl_dir / "global_step_2").exists()
    mine, theirs = json.loads((killed / "report.json").read_text()), report
    assert mine["study"] == theirs["study"]
    # the same units (in the order each ran: after the kill, SFT's kept evaluations are read before RL's)
    assert sorted(r["unit"] for r in mine["times"]) == sorted(r["unit"] for r in theirs["times"])
    assert {k: len(v) for k, v in mine["rl"].items() if isinstance(v, list)} == {
        k: len(v) for k, v in theirs["rl"].items() if isinstance(v, list)
    }
    assert len(mine["rl"]["health"]["rows"]) == len(theirs["rl"]["health"]["rows"])
    for a, b in zip(mine["comparisons"], theirs["comparisons"], strict=True):
        assert (a["arm"], a["against"], a["metric"], a["problems"], a["seeds"]) == (
            b["arm"],
            b["against"],
            b["metric"],
            b["problems"],
            b["seeds"],
        )
    assert {n: m["avg"]["problems"] for n, m in mine["models"].items()} == {
        n: m["avg"]["problems"] for n, m in theirs["models"].items()
    }


def _steps(metrics: Path) -> list[int]:
    """The steps verl's file logger recorded (a line cut by a kill skipped)."""
    from e2c.launch.checkpoints import step_metrics

    return list(step_metrics(metrics.parent)) if metrics.is_file() else []
