"""The quickstart (scripts/quickstart.sh, e2c.quickstart): statistics against hand values and reference loops,
stage selection (--from, --force, settings changes, resume), progress parsing, one whole --fast run on the
tiny model (report, plots and JSON consistent with the evaluation files; not that the tiny model learns),
and bad input answered with one line and exit status 2."""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from e2c.core.errors import UserError
from e2c.core.progress import evaluation_line
from e2c.core.stats import align_scores, paired_difference, wilson_interval
from e2c.quickstart.cli import build_parser, config_from_args
from e2c.quickstart.config import STAGES, Config
from e2c.quickstart.context import Context
from e2c.quickstart.data import generation_count
from e2c.quickstart.plan import StageState, check_inputs, select_stages, startable
from e2c.quickstart.progress import eta_seconds, eval_parser, fmt_seconds, step_parser, tts_parser
from e2c.quickstart.report import trend
from e2c.quickstart.stages import rl_curve, sft_losses, tts_command
from e2c.view.page import extract_json

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------ statistics
def test_wilson_interval_matches_hand_values() -> None:
    # 5/10: centre 0.5, half-width 1.96 * sqrt(0.025 + 1.96^2/400) / (1 + 1.96^2/10) = 0.2634
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    # 0/10: lower bound exactly 0, upper z^2 / (n + z^2) = 3.8415 / 13.8415
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(3.8415 / 13.8415, abs=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(1 - 3.8415 / 13.8415, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_paired_difference_matches_reference_loop() -> None:
    rng = random.Random(3)
    for n in (2, 7, 200):
        before = [float(rng.random() < 0.2) for _ in range(n)]
        after = [float(rng.random() < 0.5) for _ in range(n)]
        res = paired_difference(after, before)
        diffs = []
        for a, b in zip(after, before, strict=True):
            diffs.append(a - b)
        mean = sum(diffs) / n
        se = statistics.stdev(diffs) / math.sqrt(n)
        assert res["mean"] == pytest.approx(mean)
        assert res["se"] == pytest.approx(se)
        assert res["exceeds_2se"] == (mean > 2 * se)
        assert res["improved"] == sum(d > 0 for d in diffs) and res["worsened"] == sum(d < 0 for d in diffs)
    same = paired_difference([1.0, 0.0], [1.0, 0.0])
    assert same["mean"] == 0 and same["se"] == 0 and not same["exceeds_2se"]
    assert paired_difference([], [])["n"] == 0
    with pytest.raises(ValueError):
        paired_difference([1.0], [])


def test_align_scores_pairs_by_problem_id() -> None:
    after, before, ids = align_scores({"b": 1.0, "a": 0.0, "x": 1.0}, {"a": 1.0, "b": 0.0, "c": 1.0})
    assert ids == ["a", "b"] and after == [0.0, 1.0] and before == [1.0, 0.0]


def test_trend_halves_and_slope() -> None:
    t = trend([1.0, 2.0, 3.0, 4.0])
    assert t["slope_per_step"] == pytest.approx(1.0)
    assert t["first_half_mean"] == 1.5 and t["second_half_mean"] == 3.5
    assert trend([]) is None


# ------------------------------------------------------------------------------------------------ planning
def _wanted(cfg: Config | None = None) -> dict:
    cfg = cfg or Config()
    return {s: cfg.stage_settings(s) for s in STAGES}


def _done_states(wanted: dict, stages=STAGES) -> dict:
    return {s: StageState(done={"settings": wanted[s]}, started=wanted[s]) for s in stages}


def test_fresh_folder_runs_everything() -> None:
    actions = select_stages({}, _wanted())
    assert actions["data"] == "run"
    assert all(actions[s] == "redo" for s in STAGES[1:])  # everything after data reads what data makes
    check_inputs(actions, {})


def test_finished_run_is_skipped_and_force_redoes_all() -> None:
    w = _wanted()
    states = _done_states(w)
    assert set(select_stages(states, w).values()) == {"skip"}
    assert set(select_stages(states, w, force=True).values()) == {"redo"}


def test_from_redoes_that_stage_and_later_ones() -> None:
    w = _wanted()
    actions = select_stages(_done_states(w), w, from_stage="sft")
    assert [actions[s] for s in STAGES] == ["skip", "skip"] + ["redo"] * (len(STAGES) - 2)


def test_interrupted_stage_resumes_and_dependents_rerun() -> None:
    w = _wanted()
    states = _done_states(w, ("data", "baseline", "sft"))
    states["eval_sft"] = StageState(started=w["eval_sft"])  # killed while evaluating the SFT model
    actions = select_stages(states, w)
    assert actions["eval_sft"] == "run"
    assert actions["filter"] == "run"  # reads data and sft only: not done yet, nothing to redo
    assert actions["rl"] == "redo"  # reads the filter's prompts, which are made again
    assert actions["report"] == "redo"
    # A stage that completed but whose input runs again is redone, whatever it recorded.
    states = _done_states(w)
    states["sft"] = StageState(started=w["sft"])
    actions = select_stages(states, w)
    assert actions["sft"] == "run" and actions["eval_sft"] == actions["rl"] == actions["tts"] == "redo"
    assert actions["baseline"] == "skip"


def test_changed_settings_of_a_finished_stage_are_refused() -> None:
    w = _wanted()
    states = _done_states(w)
    new = _wanted(Config(sft_lr=1e-3))
    with pytest.raises(
        UserError, match=r"stage sft finished with other settings \(sft_lr 0.0002 -> 0.001\).*--from sft"
    ):
        select_stages(states, new)
    # --from that stage (or an earlier one) accepts the change; --from a later one does not.
    assert select_stages(states, new, from_stage="sft")["sft"] == "redo"
    assert select_stages(states, new, from_stage="data")["sft"] == "redo"
    with pytest.raises(UserError, match="stage sft finished with other settings"):
        select_stages(states, new, from_stage="rl")
    assert select_stages(states, new, force=True)["sft"] == "redo"


def test_half_run_stage_with_other_settings_is_refused() -> None:
    w = _wanted()
    states = _done_states(w, ("data",))
    states["baseline"] = StageState(started={**w["baseline"], "eval_max_tokens": 999})
    with pytest.raises(UserError, match=r"stage baseline was started with other settings.*--from baseline"):
        select_stages(states, w)


def test_from_a_stage_whose_inputs_are_missing() -> None:
    w = _wanted()
    actions = select_stages({}, w, from_stage="eval_sft")
    assert actions["data"] == actions["sft"] == "missing"
    with pytest.raises(
        UserError,
        match=r"stage eval_sft needs the output of stages data, sft.*valid --from stages here: data$",
    ):
        check_inputs(actions, {})
    states = _done_states(w, ("data",))
    actions = select_stages(states, w, from_stage="eval_sft")
    with pytest.raises(UserError, match="needs the output of stage sft"):
        check_inputs(actions, states)
    assert startable(states) == ["data", "baseline", "sft", "report"]
    with pytest.raises(UserError, match=r"--from 'rll' is not a stage \(did you mean rl\?\); valid: data, "):
        select_stages({}, w, from_stage="rll")


def test_fast_preset_yields_to_explicit_flags() -> None:
    cfg = config_from_args(build_parser().parse_args(["--fast", "--sft-steps", "5"]))
    assert cfg.fast and cfg.model == "tiny" and cfg.sft_steps == 5 and cfg.out == "outputs/quickstart-fast"
    cfg = config_from_args(build_parser().parse_args(["--families", "countdown", "--tts-budgets", "2"]))
    assert cfg.families == ("countdown",) and cfg.tts_budgets == (2,) and cfg.model == "embedded"
    # a whole Config (a preset's values, a study file's) is checked by the flags' own types
    with pytest.raises(UserError, match="--families names an unknown family 'nope'; valid: arithmetic"):
        replace(Config(), families=("nope",)).check_values()
    with pytest.raises(UserError, match="--tts-top-p must be > 0 and <= 1, got 2"):
        replace(Config(), tts_top_p=2.0).check_values()


def test_tts_budget_flags_and_their_old_spellings() -> None:
    cfg = config_from_args(
        build_parser().parse_args(["--tts-explore-budget", "30", "--tts-execute-budget", "50"])
    )
    assert (cfg.tts_explore_budget, cfg.tts_execute_budget) == (30, 50)
    old = config_from_args(
        build_parser().parse_args(["--tts-explore-tokens", "30", "--tts-execute-tokens", "50"])
    )
    assert old == cfg
    ctx = Context(cfg, Path("/tmp/qs"))
    sets = [a for a in tts_command(ctx, "model") if "=" in a]
    assert "explore_budget=30" in sets and "execute_budget=50" in sets and "cot_tokens=80" in sets


def test_generation_count_covers_the_held_out_set() -> None:
    cfg = Config()  # only the chosen families and levels are drawn; a fifth to eval, 80% short enough
    n = generation_count(cfg)
    assert n * 0.2 * 0.8 >= cfg.eval_problems


# ------------------------------------------------------------------------------------------------ progress
def test_progress_parsers_and_eta() -> None:
    parse = eval_parser({"synthetic": 200, "gsm8k": 20})
    msg, frac = parse("synthetic: 32/200 problems, 32 new samples in 40s (0.80 samples/s)")
    assert frac == pytest.approx(32 / 220) and "synthetic 32/200" in msg
    assert parse("model: tiny on hf") is None
    # One command, two evaluations (--then): each starts with its own line, so the problem lines after it are
    # its; an evaluation already complete when a stage resumes prints no problem line and still counts done.
    both = eval_parser({"synthetic": 6, "gsm8k": 2}, passes=2)
    lines = [
        evaluation_line(1, 2, "greedy"),
        "synthetic: 6/6 problems, 1 new samples",
        "gsm8k: 2/2 problems, 1 new samples",
        evaluation_line(2, 2, "avg8"),
        "synthetic: 3/6 problems, 1 new samples",
        "gsm8k: 2/2 problems, 1 new samples",
        "synthetic: 6/6 problems, 1 new samples",
    ]
    assert [both(line)[1] for line in lines] == pytest.approx([0, 6 / 16, 0.5, 0.5, 11 / 16, 13 / 16, 1.0])
    assert both("gsm8k: 2/2 problems")[0] == "problems synthetic 6/6, gsm8k 2/2 (evaluation 2/2)"
    resumed = eval_parser({"synthetic": 6}, passes=2)
    assert resumed(evaluation_line(1, 2, "greedy"))[1] == 0.0
    assert resumed(evaluation_line(2, 2, "avg8"))[1] == 0.5  # the first was complete: no line of its own
    assert resumed("synthetic: 2/6 problems, 2 new samples")[1] == pytest.approx(8 / 12)
    assert resumed("synthetic: 9/6 problems")[1] == 1.0  # a count past the total is the total
    assert (
        resumed("evaluation 1/2:")[1] == 0.0
    )  # the line of a folder with an empty name still marks the start
    assert step_parser(24)("(TaskRunner pid=1) step:6 - critic/score/mean:0.1")[1] == 0.25
    assert tts_parser()("[tts] 3/12 e2c_sc K=2 synthetic-ab12: wrong, 40 tokens, 9 s")[1] == 0.25
    assert eta_seconds(30.0, 0.25, 600) == pytest.approx(90.0)
    assert eta_seconds(30.0, None, 600) == 570.0
    assert fmt_seconds(75) == "1m15s" and fmt_seconds(3700) == "1h01m" and fmt_seconds(None) == "?"


def test_curves_read_from_run_files(tmp_path: Path) -> None:
    sft = tmp_path / "sft"
    sft.mkdir()
    records = [
        (1, {"train/loss": 2.5, "x": 1}),
        (2, {"a": 1, "train/loss": 1.5}),
        (2, {"val/loss": 9.0}),
        (2, {"train/loss": 1.25}),
    ]
    (sft / "metrics.jsonl").write_text("".join(json.dumps({"step": k, "data": d}) + "\n" for k, d in records))
    assert sft_losses(sft) == {1: 2.5, 2: 1.25}  # a step logged again (a resumed run) keeps its last loss
    lines = [
        {"step": 2, "data": {"critic/score/mean": 0.5}},
        {"step": 1, "data": {"critic/score/mean": 0.25}},
        {"step": 3, "data": {"other": 1}},
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n{cut")
    assert [(r["step"], r["reward"]) for r in rl_curve(tmp_path)] == [(1, 0.25), (2, 0.5)]


def test_report_pages_per_stage_and_compared_cpu(tmp_path: Path) -> None:
    """A page per finished evaluation stage (its sampled run where there is one) and the comparisons whose
    two stages were measured the same way; a stage cut short is named, not fatal; report.md links them."""
    from view.test_view_cpu import rows, write_run

    from e2c.quickstart.pages import quickstart_pages
    from e2c.view import page_lines, write_pages

    out = tmp_path / "qs"
    for stage, flip in (("baseline", False), ("eval_sft", False), ("eval_rl", True)):
        write_run(out / stage / "sampled", rows(flip))
        write_run(out / stage, rows(flip))  # the greedy run beside it
        (out / stage / "DONE.json").write_text("{}")
    (out / "eval_control").mkdir()  # started, never finished: no page
    (out / "report").mkdir()
    pages = write_pages(quickstart_pages(Context(cfg=None, out=out)), out / "report", out)
    assert set(pages) == {
        "view-baseline.html",
        "view-sft.html",
        "view-rl.html",
        "view-sft-vs-rl.html",
        "view-baseline-vs-sft.html",
    }
    cmp = pages["view-sft-vs-rl.html"]
    assert cmp["path"] == "report/view-sft-vs-rl.html" and "(sampled)" in cmp["what"] and cmp["note"] is None
    data = extract_json((out / cmp["path"]).read_text(encoding="utf-8"))
    assert [r["label"] for r in data["runs"]] == ["SFT", "RL"]
    assert (data["paired"]["gained"], data["paired"]["lost"]) == (["toy/p0"], ["toy/p2"])
    assert extract_json((out / "report" / "view-rl.html").read_text(encoding="utf-8"))["runs"][0][
        "path"
    ].endswith("eval_rl/sampled")
    lines = page_lines(pages)
    assert lines[0] == "## Pages\n" and "[view-sft-vs-rl.html](report/view-sft-vs-rl.html)" in lines[2]
    # a stage whose results file was cut: its page and its comparisons are named, the others written
    (out / "eval_rl" / "sampled" / "results.json").write_text('{"config": {')
    pages = write_pages(quickstart_pages(Context(cfg=None, out=out)), out / "report", out)
    assert pages["view-rl.html"]["path"] is None and pages["view-rl.html"]["note"]
    assert pages["view-sft.html"]["path"] == "report/view-sft.html"
    assert any(line.startswith("- view-rl.html: not written (") for line in page_lines(pages))


# ------------------------------------------------------------------------------------------------ end to end
def _quickstart(
    *args: str, timeout: int = 900, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "e2c.quickstart", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
    )


@pytest.mark.slow  # the whole quickstart --fast: ~5 min
def test_fast_run_end_to_end_cpu(tmp_path: Path) -> None:
    out = tmp_path / "base" / "quickstart-fast"  # where E2C_BASE_DIR=<tmp>/base puts a --fast run
    res = _quickstart("--fast", "--with-control", "--out", str(out))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for stage in STAGES:
        assert (out / stage / "DONE.json").is_file(), stage
        assert f"[quickstart {STAGES.index(stage) + 1}/{len(STAGES)} {stage}]" in res.stdout
    assert "ETA" in res.stdout
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["report"] == str(out / "report.md")

    report = json.loads((out / "report.json").read_text())
    md = (out / "report.md").read_text()
    # The pages: one per evaluation stage and SFT against RL, linked from report.md.
    page = report["pages"]["view-sft-vs-rl.html"]
    assert page["path"] == "report/view-sft-vs-rl.html" and f"]({page['path']})" in md
    assert len(extract_json((out / page["path"]).read_text(encoding="utf-8"))["problems"]) == 6 + 2
    # Every evaluation stage's accuracy in the report is what its own results file says.
    for stage in ("baseline", "eval_sft", "eval_rl", "eval_control"):
        results = json.loads((out / stage / "results.json").read_text())
        assert set(report["eval"][stage]) == set(results["datasets"]) == {"synthetic", "gsm8k"}
        for name, m in results["datasets"].items():
            e = report["eval"][stage][name]
            assert e["accuracy"] == m["pass@1"] and e["format_rate"] == m["format_rate"]
            assert e["problems"] == m["problems"]
            assert e["correct"] == round(m["pass@1"] * m["problems"])
            assert e["ci95"] == list(wilson_interval(e["correct"], e["problems"]))
        assert summary["accuracy"][stage]["synthetic"] == results["datasets"]["synthetic"]["pass@1"]
    data = json.loads((out / "data" / "counts.json").read_text())
    assert report["data"] == data and data["overlap"]["sft_eval"] == data["overlap"]["rl_eval"] == 0
    assert report["eval"]["baseline"]["synthetic"]["problems"] == data["splits"]["eval"] == 6
    diff = report["differences"]["sft_minus_baseline"]["synthetic"]
    assert diff["n"] == 6 and diff["after"] == "eval_sft"
    # Per family and level: every held-out problem counted once, and the cells add up to the stage's total.
    families = json.loads((out / "data" / "eval_families.json").read_text())
    assert len(families) == 6 and set(families.values()) <= {"arithmetic/L1", "code/L1"}
    for stage in ("baseline", "eval_sft", "eval_rl", "eval_control"):
        cells = report["by_family"][stage].values()
        assert sum(c["problems"] for c in cells) == 6
        assert sum(c["correct"] for c in cells) == report["eval"][stage]["synthetic"]["correct"]
    assert "| arithmetic/L1 | " in md
    # The code family's own line: a code problem counts as solved when its program passes every test.
    code_ids = [k for k, v in families.items() if v.startswith("code/")]
    for stage in ("baseline", "eval_sft", "eval_rl", "eval_control"):
        kinds = report["by_kind"][stage]
        assert kinds.get("code", {"problems": 0})["problems"] == len(code_ids)
        assert sum(c["correct"] for c in kinds.values()) == report["eval"][stage]["synthetic"]["correct"]
    assert ("- Code, greedy" in md) == bool(code_ids)
    for row in report["stages"]:
        assert row["seconds"] == json.loads((out / row["stage"] / "DONE.json").read_text())["seconds"]
    assert len(report["sft"]["losses"]) == 2 and len(report["rl"]["curve"]) == 1
    # One mini-batch, one epoch: the on-policy loss, so no separate old-log-prob pass (whose comparison
    # with the rollout, training/rollout_probs_diff_*, is then not made); the entropy is the rollout's.
    rl_steps = [
        json.loads(x)["data"] for x in (out / "rl" / "metrics.jsonl").read_text().splitlines() if x.strip()
    ]
    assert rl_steps and all("timing_s/update_actor" in m for m in rl_steps)
    assert all(m["e2c/old_log_prob_skipped"] == 1.0 for m in rl_steps)
    assert not any("training/rollout_probs_diff_max" in m for m in rl_steps)
    assert all("health/entropy_sampled" in m and "health/update_skipped" in m for m in rl_steps)
    rl_cmd = json.loads((out / "rl" / "DONE.json").read_text())["commands"][0]
    # the default reward shape, correct: the metric's correctness, no format term
    assert (
        "--health-stop-after 5" in rl_cmd
        and "format_credit=0 " in rl_cmd
        and "require_format=false" in rl_cmd
    )
    flt_cmd = json.loads((out / "filter" / "DONE.json").read_text())["commands"][0]
    assert "--reward-shape correct" in flt_cmd
    # The pass-rate filter sampled the RL prompts with the SFT model; RL trained on what it kept.
    flt = json.loads((out / "filter" / "DONE.json").read_text())
    assert flt["prompts"] == 4 and flt["kept"] == 4 and sum(flt["histogram"]) == 4  # band "all" in --fast
    assert len(pd.read_parquet(out / "filter" / "rl.parquet")) == 4
    assert (
        str(out / "filter" / "rl.parquet")
        in json.loads((out / "rl" / "DONE.json").read_text())["commands"][0]
    )
    assert report["filter"]["kept"] == 4 and "RL prompts: the pass-rate filter kept 4 of 4" in md
    # RL health: one row per step, the reward's parts add up to verl's mean reward, a verdict line.
    health = report["rl"]["health"]
    assert [r["step"] for r in health["rows"]] == [1]
    row = health["rows"][0]
    parts = row["health/reward_correct"] + row["health/reward_plan"] + row["health/reward_overlong"]
    assert parts == pytest.approx(row["critic/score/mean"], abs=1e-5)
    assert 0.0 <= row["health/zero_var_group_share"] <= 1.0
    assert row["weight_source"] in ("rollout_sync", "checkpoint")
    assert health["verdict"].split(":")[0] in (
        "no signal",
        "no movement",
        "signal of the wrong kind",
        "had signal",
    )
    assert "### RL health" in md and health["verdict"] in md
    # The equal-compute control: SFT from the SFT model for about the RL stage's trained tokens, evaluated
    # on the same problems, and paired with RL in the report.
    ctl = json.loads((out / "control" / "DONE.json").read_text())
    assert ctl["steps"] >= 1 and ctl["rl_trained_tokens"] > 0
    assert (out / "control" / "final" / "config.json").is_file()
    assert report["differences"]["rl_minus_control"]["synthetic"]["n"] == 6
    assert report["control"]["steps"] == ctl["steps"] and "Equal-compute control" in md
    tts_cfg = json.loads(next((out / "tts" / "runs").glob("*/*/config.json")).read_text())
    assert tts_cfg["settings"]["top_p"] == 1.0
    assert report["tts"]["summary"] and {r["method"] for r in report["tts"]["summary"]} == {
        "self_consistency",
        "e2c_rp",
    }
    for name, rel_path in report["plots"].items():
        assert rel_path, name
        p = out / rel_path
        assert p.is_file() and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"]({rel_path})" in md
    assert any(v in md for v in ("RL did not beat SFT", "RL did not clearly beat SFT", "RL beat SFT"))
    # The paper's measure beside greedy: avg@k of the sampled runs, paired, and the pass@k curve.
    for stage in ("eval_sft", "eval_rl", "eval_control"):
        sampled = json.loads((out / stage / "sampled" / "results.json").read_text())
        e = report["eval_sampled"][stage]["synthetic"]
        assert e["accuracy"] == sampled["datasets"]["synthetic"]["pass@1"] and e["samples_per_problem"] == 2
        assert set(e["pass_at_k"]) == {"1", "2"} and e["pass_at_k"]["1"] == pytest.approx(e["accuracy"])
    assert report["eval_sampled"]["baseline"] is None
    assert report["sampled_differences"]["rl_minus_sft"]["synthetic"]["n"] == 6
    assert report["measure"] == "avg@2 at T 1" and "### pass@k before and after RL" in md
    assert "avg@2 at T 1: SFT" in report["verdicts"]["rl"]
    assert report["system"]["git_commit"] and report["system"]["torch_threads"]

    # The demo's helper points at the RL model and the first held-out problem; nothing for an empty folder.
    found = subprocess.run(
        [sys.executable, "-m", "e2c.quickstart.trained", "--out", str(out), "--with-problem"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    words = found.stdout.split("\0")[:-1]
    assert found.returncode == 0 and words[0] == "--model" and "RL model" in found.stderr
    assert Path(words[1]) == out / report["rl"]["model"] and (Path(words[1]) / "config.json").is_file()
    assert words[2:4] == [
        "--problem",
        pd.read_parquet(out / "data" / "eval" / "synthetic.parquet")["problem"][0],
    ]
    empty = subprocess.run(
        [sys.executable, "-m", "e2c.quickstart.trained", "--out", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert empty.returncode == 0 and empty.stdout == ""

    # A rerun with the same settings skips every stage, here found through E2C_BASE_DIR from another working
    # directory (as a fresh checkout pointed at the base folder finds it); another setting for a finished
    # stage is refused.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    based = {"E2C_BASE_DIR": str(tmp_path / "base"), "E2C_HOME": str(ROOT)}
    again = _quickstart("--fast", "--with-control", timeout=120, env=based, cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("skipped") == len(STAGES) and str(out) in again.stdout
    assert not (elsewhere / "outputs").exists()
    refused = _quickstart("--fast", "--with-control", "--out", str(out), "--sft-lr", "0.001", timeout=120)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "error: stage sft finished with other settings (sft_lr 0.0002 -> 0.001); add --from sft to redo it "
        "and the stages after it, or --force to redo everything"
    ]


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--from", "sfft"],
            "error: --from 'sfft' is not a stage (did you mean sft?); valid: data, baseline, sft, "
            "eval_sft, filter, rl, eval_rl, tts, control, eval_control, report",
        ),
        (
            ["--from", "eval_sft"],
            "error: stage eval_sft needs the output of stages data, sft, not complete in this "
            "output folder; valid --from stages here: data",
        ),
        (
            ["--families", "geometry"],
            "error: --families names an unknown family 'geometry'; valid: arithmetic, "
            "linear_equation, modular, gcd_lcm, counting, sequence, list_ops, countdown, small_arithmetic, code "
            "(see scripts/quickstart.sh --help)",
        ),
        (["--filter-k", "1"], "error: --filter-k must be >= 2, got 1 (see scripts/quickstart.sh --help)"),
        (
            ["--eval-samples", "-1"],
            "error: --eval-samples must be >= 0, got -1 (see scripts/quickstart.sh --help)",
        ),
        (
            ["--rl-reward-shape", "gated"],
            "error: --rl-reward-shape names an unknown reward shape 'gated' (did you mean 'gate'?); valid: "
            "correct, credit, gate, levels (see scripts/quickstart.sh --help)",
        ),
        (
            ["--rl-families", "geometry"],
            "error: --rl-families names an unknown family 'geometry'; valid: arithmetic, linear_equation, modular, "
            "gcd_lcm, counting, sequence, list_ops, countdown, small_arithmetic, code (see scripts/quickstart.sh "
            "--help)",
        ),
        (
            ["--rl-overlong-buffer", "-1"],
            "error: --rl-overlong-buffer must be >= 0, got -1 (see scripts/quickstart.sh --help)",
        ),
        (
            ["--rl-temperature", "0"],
            "error: --rl-temperature must be a positive number, got 0 (see scripts/quickstart.sh --help)",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "qs"
    res = _quickstart("--out", str(out), *args, timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [message]
    assert not out.exists()  # nothing was created or changed


def test_unknown_filter_band_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "qs"
    res = _quickstart("--out", str(out), "--filter-band", "learnabel", timeout=120)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --filter-band 'learnabel' is unknown")
    assert "did you mean 'learnable'?" in lines[0] and not out.exists()


def test_foreign_output_folder_is_never_cleared(tmp_path: Path) -> None:
    out = tmp_path / "qs"
    (out / "data").mkdir(parents=True)
    (out / "data" / "mine.txt").write_text("keep me")
    res = _quickstart("--fast", "--out", str(out), timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"error: {out / 'data'} exists and was not made by the quickstart; pick another --out (nothing was changed)"
    ]
    assert (out / "data" / "mine.txt").read_text() == "keep me" and sorted(out.iterdir()) == [out / "data"]


def test_a_stage_recorded_under_an_old_setting_name_is_still_complete_cpu(tmp_path: Path) -> None:
    """--rl-explore-coef became --rl-explore-adv-coef: a run folder finished before the rename resumes."""
    import json
    from types import SimpleNamespace

    from e2c.quickstart.plan import select_stages
    from e2c.quickstart.runner import stage_states

    (tmp_path / "rl").mkdir()
    old = {"seed": 0, "rl_explore_coef": 2.0}
    (tmp_path / "rl" / "DONE.json").write_text(json.dumps({"settings": old, "seconds": 1.0}))
    (tmp_path / "rl" / "STARTED.json").write_text(json.dumps(old))
    states = stage_states(SimpleNamespace(stages=("rl",)), SimpleNamespace(dir=lambda s: tmp_path / s))
    now = {"rl": {"seed": 0, "rl_explore_adv_coef": 2.0}}
    assert select_stages(states, now, stages=("rl",), depends={}) == {"rl": "skip"}
    with pytest.raises(UserError, match="other settings"):  # a changed value is still a change
        select_stages(states, {"rl": {"seed": 0, "rl_explore_adv_coef": 1.0}}, stages=("rl",), depends={})


def test_gsm8k_lookup_with_no_hub_is_one_short_probe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No local copy and a hub that never answers: one probe of 1.5 s, one note (the hub libraries alone
    retry five times with growing waits, about 20 s). The bound leaves room for a loaded machine's imports:
    a bound of 2 s (the probe's 1.5 s plus imports) failed once on this 2-core machine."""
    import socket
    import time

    from e2c.core import models
    from e2c.data import registry
    from e2c.quickstart import data as quickstart_data
    from e2c.quickstart.data import copy_gsm8k

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(0)
    monkeypatch.setattr(models, "_HUB_PROBES", {})
    for holder in (registry, quickstart_data):
        monkeypatch.setattr(holder, "search_dirs", lambda data_dir=None: [tmp_path / "none"])
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    target = tmp_path / "gsm8k.jsonl"
    start = time.monotonic()
    try:
        got = copy_gsm8k(tmp_path / "bench", target, 20)
    finally:
        silent.close()
    assert time.monotonic() - start < 8.0
    assert got["problems"] == 0 and not target.exists()
    assert "did not answer within 1.5 s" in got["note"] and "--bench-dir" in got["note"], got["note"]
