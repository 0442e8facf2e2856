"""The dtype CPU trainers compute in (e2c.launch.devices.cpu_train_dtype): the CPU's fast one by default, passed to
verl by both launchers, a bad value refused in one line before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2c.core.errors import UserError
from e2c.core.paths import project_root
from e2c.launch import devices

ROOT = project_root()


@pytest.mark.parametrize("native, want", [(True, "bf16"), (False, "fp32")])
def test_auto_follows_the_cpus_native_bf16_cpu(monkeypatch, native: bool, want: str) -> None:
    monkeypatch.setattr(devices, "cpu_has_bf16", lambda: native)
    assert devices.cpu_train_dtype({}) == want
    assert devices.cpu_train_dtype({"E2C_TRAIN_DTYPE": "auto"}) == want
    assert devices.cpu_train_dtype({"E2C_TRAIN_DTYPE": ""}) == want
    # a named dtype wins over the machine
    assert devices.cpu_train_dtype({"E2C_TRAIN_DTYPE": "bf16"}) == "bf16"
    assert devices.cpu_train_dtype({"E2C_TRAIN_DTYPE": "fp32"}) == "fp32"


@pytest.mark.parametrize("bad", ["fp16", "bfloat16", "float32", "1", "bf16 fp32"])
def test_a_bad_value_names_the_choices_cpu(bad: str) -> None:
    with pytest.raises(UserError) as e:
        devices.cpu_train_dtype({"E2C_TRAIN_DTYPE": bad})
    assert str(e.value) == f"E2C_TRAIN_DTYPE={bad.lower()!r} is not one of auto, bf16, fp32"


def test_both_launchers_pass_the_dtype_to_verl_on_a_cpu_only_cpu(tmp_path: Path, monkeypatch) -> None:
    from e2c.rl.launch import TRAIN_DTYPE_KEYS, build_overrides, parse_args
    from e2c.sft.launch import TRAIN_DTYPE_KEY
    from e2c.sft.launch import cpu_overrides as sft_cpu_overrides

    for value in ("bf16", "fp32"):
        monkeypatch.setenv("E2C_TRAIN_DTYPE", value)
        args = parse_args(["--model", "tiny"])
        args.model_path, args.output_dir = "m", tmp_path
        cpu = build_overrides(args, 0)
        for key in TRAIN_DTYPE_KEYS:
            assert f"{key}={value}" in cpu
        assert sft_cpu_overrides()[TRAIN_DTYPE_KEY] == value
        # GPU runs keep verl's own mixed precision
        assert not any(o.startswith(TRAIN_DTYPE_KEYS) for o in build_overrides(args, 2))


@pytest.mark.parametrize("module", ["e2c.rl.launch", "e2c.sft.run"])
def test_launchers_refuse_a_bad_train_dtype_in_one_line(module: str, tmp_path: Path) -> None:
    from e2c.data.io import write_parquet
    from e2c.data.synthetic.generate import generate, rows_by_split

    if module == "e2c.rl.launch":
        extra = ["--stage", "2"]
    else:  # SFT checks its data first: a real file, so that the dtype is what it refuses
        samples, _ = generate(8, seed=0)
        extra = ["--train-data", str(write_parquet(rows_by_split(samples)["sft"], tmp_path / "sft.parquet"))]
    env = {**os.environ, "E2C_TRAIN_DTYPE": "fp16", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [
        sys.executable,
        "-m",
        module,
        "--model",
        "tiny",
        "--dry-run",
        "--output-dir",
        str(tmp_path / "run"),
    ]
    r = subprocess.run([*cmd, *extra], capture_output=True, text=True, env=env, cwd=ROOT, timeout=180)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines() == ["error: E2C_TRAIN_DTYPE='fp16' is not one of auto, bf16, fp32"]
    assert not (tmp_path / "run").exists()
