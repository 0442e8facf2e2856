"""The paper's README pipeline, typed as it types it, on this CPU with the tiny model:

    bash scripts/prepare_all_data.sh
    bash scripts/e2c_sft.sh
    MODEL_PATH=models/checkpoints/sft/final bash scripts/e2c_rl.sh
    bash scripts/eval.sh --model models/checkpoints/rl/stage2-main/final --dataset all --sample 8

Sizes are shrunk only through the paper's own environment variables (MODEL_PATH, TOTAL_TRAINING_STEPS) and
documented flags (--skip-download --synthetic --tokenizer for the offline data; --limit --max-tokens
--data-dir --backend for eval). ``--dataset all`` becomes the five math sets with local copies: the other
three (aime25, math500, math_algebra) need the hub. It runs in a copy of the checkout, since the paper's
paths (data/processed, models/checkpoints) are the project's own folders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import BENCH_DIR

ROOT = Path(__file__).resolve().parents[2]
LOCAL_MATH = "aime24,amc23,gsm8k,minerva,olympiadbench"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not BENCH_DIR.is_dir():
        pytest.skip(f"benchmark copies not found at {BENCH_DIR}")
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.splitlines()
    dest = tmp_path_factory.mktemp("paper") / "E2C"
    for f in files:
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    return dest


def _run(checkout: Path, cmd: str, timeout: int = 900, **env: str) -> subprocess.CompletedProcess:
    base = {
        k: v for k, v in os.environ.items() if k not in ("MODEL_PATH", "OUTPUT_DIR", "TRAIN_DATA", "N_GPUS")
    }
    # The environment the tests run in (the copy has none): $E2C_VENV, else the project's .venv; the copy's
    # files make the same setup stamp. No CUDA_VISIBLE_DEVICES: an empty one makes ray refuse the CPU
    # set-up's logical GPU.
    base.pop("CUDA_VISIBLE_DEVICES", None)
    base.update(E2C_VENV=os.environ.get("E2C_VENV") or str(ROOT / ".venv"), **env)
    res = subprocess.run(
        cmd, shell=True, capture_output=True, text=True, cwd=checkout, env=base, timeout=timeout
    )
    assert res.returncode == 0, f"{cmd}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def test_the_papers_pipeline_as_written_cpu(checkout: Path) -> None:
    setup = _run(checkout, "bash scripts/setup_env.sh --test --vllm")
    if "is up to date" not in setup.stdout:
        pytest.fail("the copy's setup stamp differs from the project's environment: " + setup.stdout[-500:])
    _run(checkout, "bash scripts/prepare_all_data.sh --skip-download --synthetic 120 --tokenizer tiny "
         f"--data-dir {BENCH_DIR}")  # fmt: skip
    data = checkout / "data" / "processed"
    assert (data / "sft" / "synthetic_sft.parquet").is_file() and (
        data / "rl" / "synthetic_rl.parquet"
    ).is_file()
    assert (data / "ef_sft" / "ef_sft.parquet").is_file()

    _run(checkout, "bash scripts/e2c_sft.sh", MODEL_PATH="tiny", TOTAL_TRAINING_STEPS="2")
    sft = checkout / "models" / "checkpoints" / "sft" / "final"
    assert (sft / "config.json").is_file()

    rl = _run(
        checkout,
        "bash scripts/e2c_rl.sh",
        MODEL_PATH="models/checkpoints/sft/final",
        TOTAL_TRAINING_STEPS="1",
    )
    assert "synthetic RL prompts" in rl.stdout  # offline: no paper RL data, said in one line
    for stage in ("stage1-warmup", "stage2-main"):
        final = checkout / "models" / "checkpoints" / "rl" / stage / "final"
        assert (final / "config.json").is_file() and list(final.glob("*.safetensors")), stage
    assert "stage 2 starts from stage 1's checkpoint" in rl.stdout

    ev = _run(
        checkout,
        "bash scripts/eval.sh --model models/checkpoints/rl/stage2-main/final --dataset all --sample 8 "
        f"--dataset {LOCAL_MATH} --limit 1 --max-tokens 16 --data-dir {BENCH_DIR} --backend hf --quiet",
    )
    summary = json.loads(ev.stdout.strip().splitlines()[-1])
    results = checkout / summary["results"]  # eval.sh runs in the checkout: its default path is relative
    assert results.is_file() and results.resolve().is_relative_to(checkout / "evaluation" / "e2c-eval")
    config = json.loads((results.parent / "config.json").read_text())
    assert config["samples"] == 8
