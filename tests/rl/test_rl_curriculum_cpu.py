"""e3 curriculum: difficulty bands, per-row budgets, config checks, and a real two-stage run on the tiny model."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import arithmetic_rl_rows

from e2c.core.errors import UserError
from e2c.launch.lora import lora_flags
from e2c.rl.agent_loop import row_budget
from e2c.rl.curriculum import (
    Curriculum,
    Stage,
    difficulty_value,
    launch_args,
    load_curriculum,
    parse_band,
    parse_curriculum,
    stage_data,
    with_budget,
)

ROOT = Path(__file__).resolve().parents[2]


def _rows(n: int = 12) -> list[dict]:
    return arithmetic_rl_rows(n)


def test_difficulty_values_and_bands_cpu() -> None:
    assert (
        difficulty_value(2) == 2.0
        and difficulty_value("Level 3") == 3.0
        and difficulty_value("Hard") == "hard"
    )
    assert difficulty_value(None) is None

    def in_band(value: object, band: object) -> bool:
        return parse_band(band, "difficulty").contains(value)

    assert in_band(1, {"max": 1}) and not in_band(2, {"max": 1})
    assert in_band("Level 4", {"min": 2, "max": 5}) and not in_band("Level 1", {"min": 2})
    assert in_band("hard", ["Medium", "HARD"]) and not in_band("easy", ["medium", "hard"])
    assert in_band(None, None) and in_band("x", []) and in_band("x", {}) and not in_band(None, {"min": 0})
    assert not in_band("hard", {"min": 0})  # text has no number: outside any numeric band


def test_row_budget_cpu() -> None:
    assert row_budget({"max_response_tokens": 32}, 128) == 32
    assert row_budget({"max_response_tokens": 500}, 128) == 128  # capped by the padded size
    assert row_budget({}, 128) == 128 and row_budget(None, 128) == 128
    assert row_budget({"max_response_tokens": 0}, 128) == 128


def test_with_budget_copies_cpu() -> None:
    rows = _rows(2)
    out = with_budget(rows, 64)
    assert [r["extra_info"]["max_response_tokens"] for r in out] == [64, 64]
    assert "max_response_tokens" not in rows[0]["extra_info"]  # inputs untouched
    assert out[0]["extra_info"]["difficulty"] == 1


def test_stage_data_bands_and_budgets_cpu(tmp_path: Path) -> None:
    import pandas as pd

    easy = Stage("easy", 32, parse_band({"max": 1}, "difficulty"))
    cfg = Curriculum(stages=(easy,), difficulty_field="difficulty", val_budget_factor=2)
    rows = _rows(12)
    tr, va, vb = stage_data(cfg, easy, rows, rows[:4], tmp_path)
    assert vb == 64
    train, val = pd.read_parquet(tr), pd.read_parquet(va)
    assert len(train) == 4 and {e["difficulty"] for e in train.extra_info} == {1}
    assert {e["max_response_tokens"] for e in train.extra_info} == {32}
    assert len(val) == 4 and {e["max_response_tokens"] for e in val.extra_info} == {64}
    with pytest.raises(
        UserError, match=r"no training row has extra_info.difficulty in .*values present: 1.0, 2.0, 3.0"
    ):
        stage_data(cfg, Stage("x", 8, parse_band({"min": 9}, "difficulty")), rows, rows, tmp_path)


def test_curriculum_config_checks_cpu(tmp_path: Path) -> None:
    cfg = load_curriculum(ROOT / "configs" / "e2c_curriculum.yaml")
    budgets = [s.max_response_length for s in cfg.stages]
    assert budgets == [8192, 16384] and cfg.val_budget_factor == 2  # e3's stages
    bad = [
        ({"stages": []}, "non-empty 'stages'"),
        ({"stages": [{"name": "a"}]}, "needs max_response_length"),
        ({"stages": [{"name": "a", "max_response_length": 8}] * 2}, "used twice"),
        ({"stages": [{"name": "a", "max_response_length": 8, "difficulty": "easy"}]}, "list of values or"),
        ({"algo": "ppo", "stages": [{"name": "a", "max_response_length": 8}]}, "grpo, dapo"),
        ({"val_budget_factor": 0.5, "stages": [{"name": "a", "max_response_length": 8}]}, ">= 1"),
    ]
    for c, msg in bad:
        with pytest.raises(UserError, match=msg):
            parse_curriculum(c, "c.yaml")
    with pytest.raises(UserError, match="no curriculum config"):
        load_curriculum(tmp_path / "none.yaml")


def test_launch_args_order_cpu(tmp_path: Path) -> None:
    st = Stage("s", 8, overrides=("b=2",))
    cfg = Curriculum(stages=(st,), algo="dapo", stage=2, overrides=("a=1",))
    args = launch_args(cfg, st, "m", (tmp_path / "t", tmp_path / "v", 16), tmp_path / "o", 3, ["c=3"])
    assert args[:6] == ["--algo", "dapo", "--stage", "2", "--model", "m"]
    tail = args[args.index("--") + 1 :]
    # padded size = validation budget; user overrides last so they win
    assert tail[0] == "data.max_response_length=16" and tail[-3:] == ["a=1", "b=2", "c=3"]
    assert (
        args[args.index("--logger") + 1] == "console,tensorboard"
    )  # each stage's trackers (e2c.launch.tracking)
    wandb = launch_args(cfg, st, "m", (tmp_path / "t", tmp_path / "v", 16), tmp_path / "o", 3, [], "wandb")
    assert wandb[wandb.index("--logger") + 1] == "wandb"
    # LoRA: the curriculum's flags reach every stage's launcher, before the Hydra overrides
    ns = argparse.Namespace(lora_rank=8, lora_alpha=None, lora_targets="q_proj,v_proj")
    lora = launch_args(
        cfg, st, "m", (tmp_path / "t", tmp_path / "v", 16), tmp_path / "o", 3, [], "x", lora_flags(ns)
    )
    assert lora[lora.index("--lora-rank") : lora.index("--")] == [
        "--lora-rank",
        "8",
        "--lora-targets",
        "q_proj,v_proj",
    ]
    assert lora_flags(argparse.Namespace(lora_rank=0, lora_alpha=None, lora_targets="all-linear")) == []


def _val_tokens(metrics: list[dict]) -> float:
    keys = [k for m in metrics for k in m if k.startswith("val-aux/") and "/response_tokens/mean@" in k]
    assert keys, "no validation response_tokens metric"
    return max(m[k] for m in metrics for k in keys if k in m)


@pytest.mark.slow  # minutes of real verl training: bash scripts/test.sh -m slow
def test_curriculum_two_stages_tiny_cpu(tmp_path: Path) -> None:
    import pandas as pd

    data = tmp_path / "rl.parquet"
    pd.DataFrame(_rows(16)).to_parquet(data)
    cur = tmp_path / "cur.yaml"
    cur.write_text(
        "algo: grpo\nstage: 2\nval_budget_factor: 2\nstages:\n"
        "  - {name: easy, difficulty: {max: 1}, max_response_length: 24}\n"
        "  - {name: hard, difficulty: {min: 2}, max_response_length: 48}\n"
    )
    out = tmp_path / "cur"
    cmd = ["bash", "scripts/e2c_curriculum.sh", "--model", "tiny", "--steps", "1"]
    env = {
        **os.environ,
        "CURRICULUM": str(cur),
        "TRAIN_DATA": str(data),
        "VAL_DATA": str(data),
        "OUTPUT_DIR": str(out),
    }
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    s1, s2 = out / "01_easy", out / "02_hard"
    for run in (s1, s2):
        assert (run / "CURRICULUM_DONE").is_file()
        assert (run / "global_step_1" / "actor" / "huggingface" / "config.json").is_file()
    assert f"from {s1 / 'global_step_1' / 'actor' / 'huggingface'}" in res.stdout
    m1 = [json.loads(x)["data"] for x in (s1 / "metrics.jsonl").read_text().splitlines() if x]
    m2 = [json.loads(x)["data"] for x in (s2 / "metrics.jsonl").read_text().splitlines() if x]
    train1 = [m for m in m1 if "response_length/max" in m]
    train2 = [m for m in m2 if "response_length/max" in m]
    assert train1 and max(m["response_length/max"] for m in train1) <= 24
    assert train2 and max(m["response_length/max"] for m in train2) <= 48
    # validation ran at twice the budget: the random tiny model runs on past the training budget
    assert 24 < _val_tokens(m1) <= 48
    assert 48 < _val_tokens(m2) <= 96
    # a rerun skips the finished stages
    again = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert again.returncode == 0 and again.stdout.count("done before, skipped") == 2
