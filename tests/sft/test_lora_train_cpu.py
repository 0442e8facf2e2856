"""LoRA through verl's real trainers on CPU with the tiny model: an SFT run and a GRPO run with ``--lora-rank``
change only what the adapter touches, export plain merged models, and the GRPO rollout samples from the
updated adapter (its weight-sync log against the saved checkpoint)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import arithmetic_rl_rows
from safetensors.torch import load_file

from e2c.data.io import write_parquet
from e2c.data.synthetic.generate import generate, rows_by_split
from e2c.launch.lora import ADAPTER_CONFIG, ADAPTER_DIR

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for f in folder.glob("*.safetensors"):
        out.update(load_file(f))
    return out


def _split_changes(
    trained: dict[str, torch.Tensor], base: dict[str, torch.Tensor]
) -> tuple[set[str], set[str]]:
    """(changed, unchanged) weight names, comparing in the trained model's dtype (verl exports bf16)."""
    changed = {k for k, v in trained.items() if not torch.equal(v, base[k].to(v.dtype))}
    return changed, set(trained) - changed


def _is_target(name: str) -> bool:
    return name.endswith(".weight") and name.rsplit(".", 2)[-2] in TARGETS


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return {**env, "E2C_FORCE_CPU": "1"}


@pytest.mark.slow  # a real LoRA SFT run
def test_lora_sft_changes_only_adapted_weights_and_exports_the_merge_cpu(tmp_path: Path) -> None:
    samples, _ = generate(40, seed=0)
    data = write_parquet(rows_by_split(samples)["sft"], tmp_path / "sft.parquet")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "e2c.sft.run", "--model", "tiny", "--gpus", "0", "--steps", "2"]
    cmd += ["--train-data", str(data), "--output-dir", str(out), "--lora-rank", "8"]
    cmd += ["data.train_batch_size=4", "optim.lr=1e-2", "optim.lr_warmup_steps_ratio=0"]
    res = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    final = out / "final"
    meta = json.loads((final / "e2c_sft.json").read_text())
    assert "model.lora_rank=8" in meta["overrides"]
    base = _weights(Path(meta["base_model"]))
    trained = _weights(final)
    changed, same = _split_changes(trained, base)
    assert changed and all(_is_target(k) for k in changed), sorted(changed)[:5]
    assert {k for k in same if "embed" in k or "norm" in k} == {
        k for k in trained if "embed" in k or "norm" in k
    }
    # the adapter is kept beside the merged weights, and PEFT applied to the base gives the exported model
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    assert json.loads((final / ADAPTER_DIR / ADAPTER_CONFIG).read_text())["r"] == 8
    ref = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(meta["base_model"], dtype=torch.float32), final / ADAPTER_DIR
    ).merge_and_unload()
    ids = torch.tensor([[1, 7, 11, 42]])
    with torch.no_grad():
        got = AutoModelForCausalLM.from_pretrained(final, dtype=torch.float32)(ids).logits
        want = ref(ids).logits
    assert torch.allclose(got, want, atol=0.05), (got - want).abs().max()  # bf16 export


@pytest.fixture(scope="module")
def lora_grpo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("lora_rl")
    data = tmp / "rl.parquet"
    pd.DataFrame(arithmetic_rl_rows(16)).to_parquet(data)
    out = tmp / "s1"
    env = {**_env(), "TRAIN_DATA": str(data), "VAL_DATA": str(data), "TOTAL_TRAINING_STEPS": "2"}
    cmd = ["bash", "scripts/e2c_rl.sh", "--stage", "1", "--model", "tiny", "--output-dir", str(out)]
    cmd += ["--lora-rank", "8", "--", "trainer.save_freq=1", "actor_rollout_ref.actor.optim.lr=1e-2"]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "merged the LoRA adapter into 14 weights" in res.stdout
    return out


@pytest.mark.slow  # two real GRPO steps, ~100 s: bash scripts/test.sh -m slow
def test_lora_grpo_checkpoints_are_plain_models_of_adapted_weights_cpu(
    lora_grpo: Path, tiny_path: str
) -> None:
    from transformers import AutoModelForCausalLM

    base = _weights(Path(tiny_path))
    for step in (1, 2):
        hf = lora_grpo / f"global_step_{step}" / "actor" / "huggingface"
        trained = _weights(hf)
        assert set(trained) <= set(base), sorted(set(trained) - set(base))[:3]  # plain names, no PEFT ones
        changed, _ = _split_changes(trained, base)
        assert changed and all(_is_target(k) for k in changed), sorted(changed)[:5]
        assert (hf / ADAPTER_DIR / ADAPTER_CONFIG).is_file()
        AutoModelForCausalLM.from_pretrained(hf)  # what eval, TTS and stage 2 do


@pytest.mark.slow  # shares the GRPO run above
def test_lora_grpo_rollout_samples_from_the_updated_adapter_cpu(lora_grpo: Path, tiny_path: str) -> None:
    """The rollout logs every weight sync: the first adapter (B = 0) is the base, and the sync after step 1
    carries exactly the weights saved in step 1's checkpoint (their distance from the base)."""
    syncs = [json.loads(line) for line in (lora_grpo / "rollout_sync.jsonl").read_text().splitlines()]
    adapter = [s for s in syncs if s["kind"] == "lora_adapter"]
    assert adapter[0]["shift_from_base"] == 0.0
    after1 = [s for s in adapter if s["global_steps"] == 1]
    assert after1, syncs
    base = _weights(Path(tiny_path))
    saved = _weights(lora_grpo / "global_step_1" / "actor" / "huggingface")
    dist = float(sum(((v.float() - base[k].float()) ** 2).sum() for k, v in saved.items()) ** 0.5)
    assert dist > 0
    assert after1[0]["shift_from_base"] == pytest.approx(dist, rel=0.02)
    assert after1[0]["tensors"] >= len(saved)  # the whole model goes to the engine, not the adapted part
