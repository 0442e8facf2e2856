"""``bench/eval_throughput.py`` on the tiny model: each arm runs in its own process and reports throughput,
start-up, single-stream speed and peak memory; a bad arm is one line and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2c.core.paths import project_root

BENCH = project_root() / "bench" / "eval_throughput.py"


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # tiny-model evaluations in several arms (15 s or more on 2 cores)
def test_arms_side_by_side_on_the_tiny_model(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    proc = bench(
        "--model",
        "tiny",
        "--problems",
        "3",
        "--samples",
        "2",
        "--max-tokens",
        "8",
        "--arms",
        "loop:float32,hf:float32,hf:bfloat16",
        "--json",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())
    arms = res["arms"]
    assert list(arms) == ["loop:float32", "hf:float32", "hf:bfloat16"]
    for key, r in arms.items():
        assert r["samples"] == 6, key
        assert 0 < r["tokens"] <= 6 * 8
        assert r["tokens_per_s"] > 0 and r["single_stream_tokens_per_s"] > 0
        assert r["startup_s"] > 0 and r["peak_rss_mib"] > 100
    assert arms["loop:float32"]["x_loop_tokens_per_s"] == 1.0
    assert arms["hf:float32"]["dtype"] == "float32" and arms["hf:bfloat16"]["dtype"] == "bfloat16"
    # The printed table names every arm; the last line is the JSON the file holds.
    assert all(k in proc.stdout for k in arms)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == res


def test_bad_arm_is_one_line() -> None:
    proc = bench("--arms", "loop,warp:float32")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --arms has an unknown arm 'warp'; valid: loop, hf, transformers-cb, vllm (as NAME[:DTYPE]) "
        "(see bench/eval_throughput.py --help)"
    )
    proc = bench("--arms", "hf:int3")
    assert proc.returncode != 0 and "unknown dtype 'int3'" in proc.stderr


NUMERICS = project_root() / "bench" / "dtype_numerics.py"


@pytest.mark.slow  # tiny-model evaluations in several arms (15 s or more on 2 cores)
def test_dtype_numerics_compares_real_eval_runs(tmp_path: Path, bench_dir: Path) -> None:
    args = ["--model", "tiny", "--data-dir", str(bench_dir), "--dataset", "gsm8k", "--limit", "3"]
    args += ["--max-tokens", "8", "--arms", "hf:float32,hf:bfloat16", "--out", str(tmp_path)]
    proc = subprocess.run([sys.executable, str(NUMERICS), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    base = report["arms"]["hf:float32"]["datasets"]["gsm8k"]
    assert base["problems"] == 3 and base["identical"] == 3  # the base against itself
    assert base["only_base_correct"] == base["only_this_correct"] == 0
    other = report["arms"]["hf:bfloat16"]["datasets"]["gsm8k"]
    assert other["problems"] == 3 and 0 <= other["identical"] <= 3
    assert (tmp_path / "hf-bfloat16" / "results.json").exists()
    # A second call reuses the finished runs instead of evaluating again.
    again = subprocess.run(
        [sys.executable, str(NUMERICS), *args], capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0 and "reused" in again.stdout
    assert json.loads(again.stdout.strip().splitlines()[-1])["arms"]["hf:bfloat16"]["datasets"] == {
        "gsm8k": other
    }


def test_dtype_numerics_needs_two_arms(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(NUMERICS), "--data-dir", str(tmp_path), "--arms", "hf:float32"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert "needs at least two arms" in proc.stderr.strip().splitlines()[-1]
