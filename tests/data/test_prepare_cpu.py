"""`python -m e2c.data.prepare` end to end, offline: paper-style raw files, local benchmarks, synthetic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from e2c.chain import E2C
from e2c.data.io import read_rows, write_parquet
from e2c.data.schema import validate_file

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "e2c.data.prepare", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )


def test_prepare_offline(tmp_path: Path, bench_dir: Path, tiny_path: str) -> None:
    raw, out = tmp_path / "raw", tmp_path / "processed"
    chain = E2C.format_response("\n1. add: add the numbers\n", "\nStep 1: add. 2 + 3 = 5. \\boxed{5}\n")
    write_parquet(
        [{"question": f"What is 2 + 3 (copy {i})?", "solution": chain, "answer": "5"} for i in range(60)]
        + [{"question": "broken", "solution": "<EXPLORATION>no end", "answer": "1"}],
        raw / "e2c-sft.parquet",
    )
    write_parquet(
        [
            {
                "prompt": [{"role": "user", "content": f"Q{i}"}],
                "data_source": "math",
                "reward_model": {"ground_truth": str(i)},
                "extra_info": {"split": "train"},
            }
            for i in range(50)
        ],
        raw / "ef-rl.parquet",
    )
    write_parquet(
        [{"problem": "Q1", "answer": "1"}, {"problem": "V", "answer": "2"}], raw / "ef-rl-valid.parquet"
    )
    r = _run(
        "--skip-download",
        "--synthetic",
        "1000",
        "--data-dir",
        str(bench_dir),
        "--tokenizer",
        "tiny",
        "--raw",
        str(raw),
        "--out",
        str(out),
        "--val-frac",
        "0.1",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    for sub, schema in (("sft", "sft"), ("rl", "rl"), ("eval", "eval"), ("ef_sft", "ef_sft")):
        files = sorted((out / sub).glob("*.parquet"))
        assert files, sub
        for f in files:
            assert validate_file(f, schema) > 0
    assert {p.stem for p in (out / "eval").glob("*.parquet")} >= {"gsm8k", "medqa", "anatomy", "synthetic"}
    rl_train = {r["prompt"][-1]["content"] for r in read_rows(out / "rl" / "e2c_rl_train.parquet")}
    rl_val = {r["prompt"][-1]["content"] for r in read_rows(out / "rl" / "e2c_rl_val.parquet")}
    assert len(rl_val) == 2 and not rl_train & rl_val  # Q1 is in the validation file, so not in training
    sft_n = sum(1 for _ in read_rows(out / "sft" / "e2c_sft_train.parquet"))
    sft_v = sum(1 for _ in read_rows(out / "sft" / "e2c_sft_val.parquet"))
    assert sft_n + sft_v == 60
    assert "dropped {'truncated_exploration': 1}" in r.stdout
    assert "synthetic: " in r.stdout and "ef_sft: " in r.stdout
    assert "no local copy of aime25, math500, math_algebra" in r.stdout


def test_prepare_bad_flags() -> None:
    r = _run("--synthetic", "-3", "--skip-download")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--synthetic must be >= 0" in r.stderr
    r = _run("--skip-download", "--data-dir", "/nonexistent")
    assert r.returncode == 2 and "--data-dir /nonexistent does not exist" in r.stderr
    r = _run("--bogus")
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr
