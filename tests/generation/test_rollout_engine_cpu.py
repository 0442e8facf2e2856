"""The RL rollout's two CPU engines (:mod:`e2c.verl_cpu.rollout_engine`) against each other on the tiny model in
fp32: the same greedy tokens and log-probabilities, stop ids kept, budgets kept (0 included), pushed weights
used by the next decode (vLLM's prefix cache dropped), seeded sampling that repeats, and sampled-token
log-probabilities equal to a plain forward pass. The vLLM half needs vllm (skipped without it); the cases
run in a subprocess (``tests/fixtures/rollout_engine_probe.py``)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2c.verl_cpu.rollout_engine import rollout_engine

ROOT = Path(__file__).resolve().parents[2]


def test_engine_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2C_ROLLOUT_ENGINE", raising=False)
    has_vllm = importlib.util.find_spec("vllm") is not None
    assert rollout_engine() == ("vllm" if has_vllm else "hf")
    assert rollout_engine("hf") == "hf" and rollout_engine("VLLM ") == "vllm"
    monkeypatch.setenv("E2C_ROLLOUT_ENGINE", "hf")
    assert rollout_engine() == "hf"
    monkeypatch.setenv("E2C_ROLLOUT_ENGINE", "sglang")
    with pytest.raises(ValueError, match="E2C_ROLLOUT_ENGINE='sglang' is not one of auto, hf, vllm"):
        rollout_engine()


@pytest.mark.slow  # vLLM on CPU
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm not installed")
def test_vllm_engine_matches_transformers_engine(tiny_path: str, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    r = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fixtures" / "rollout_engine_probe.py"), tiny_path, str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(out.read_text())
    hf, vl = d["hf"], d["vllm"]
    for k in ("greedy", "stopped", "after_load", "restored"):
        assert vl[k] == hf[k], k
    # Budgets (12, 12, 5, 0) and the stop id (prompt 0's 3rd greedy token): the row ends at its first
    # occurrence, which is kept.
    row = hf["greedy"][0]
    assert (
        row == hf["stopped"][0] and len(row) <= 3 and row[-1] == d["stop_id"] and d["stop_id"] not in row[:-1]
    )
    assert len(hf["greedy"][2]) <= 5 and hf["greedy"][3] == []
    # Pushed weights change what is generated, and the originals bring the first output back.
    assert hf["after_load"] != hf["greedy"] and hf["restored"] == hf["greedy"]
    assert vl["loaded"] == hf["loaded"] > 0
    for a, b in zip(vl["greedy_lp"], hf["greedy_lp"], strict=True):
        assert a == pytest.approx(b, abs=2e-3)
    assert vl["sampled_repeat"] and hf["sampled_repeat"]
    assert sum(len(row) for row in vl["sampled"]) > 0
    for a, b in zip(vl["sampled_lp"], d["vllm_sampled_lp_recomputed"], strict=True):
        assert a == pytest.approx(b, abs=2e-3)


CHOICES = {
    "E2C_ROLLOUT_ENGINE": "auto, hf, vllm",
    "E2C_ROLLOUT_DTYPE": "auto, bfloat16, float32",
    "E2C_ROLLOUT_SYNC_VIA": "shm, ray",
}


@pytest.mark.parametrize("var", sorted(CHOICES))
def test_launcher_refuses_a_bad_rollout_variable_in_one_line(var: str, tmp_path: Path) -> None:
    env = {**os.environ, var: "nope", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, "-m", "e2c.rl.launch", "--stage", "1", "--model", "tiny", "--dry-run"]
    cmd += ["--output-dir", str(tmp_path / "run")]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"error: {var}='nope' is not one of {CHOICES[var]}"]
