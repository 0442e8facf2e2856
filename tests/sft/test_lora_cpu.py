"""LoRA merging (e2c.launch.lora) against PEFT's own merge and a plain loop, the rollout's adapter sync, the folder
conversions of verl's LoRA outputs, and the LoRA flags of the launchers."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from bad_input import assert_one_line_error, run
from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.core.errors import UserError
from e2c.data.io import write_parquet
from e2c.data.synthetic.generate import generate, rows_by_split
from e2c.launch.lora import (
    ADAPTER_DIR,
    AdapterSync,
    LoraConfig,
    adapter_pairs,
    lora_delta,
    merge_adapter_folder,
    merge_lora,
    merge_peft_folder,
    plain_name,
    split_peft_state,
)


def _loop_merge(
    w: list[list[float]], a: list[list[float]], b: list[list[float]], s: float
) -> list[list[float]]:
    """W + s * B @ A, one element at a time."""
    out = []
    for i in range(len(w)):
        row = []
        for j in range(len(w[0])):
            row.append(w[i][j] + s * sum(b[i][k] * a[k][j] for k in range(len(a))))
        out.append(row)
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5),
    st.integers(1, 6),
    st.integers(1, 4),
    st.integers(1, 64),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_merge_matches_a_plain_loop_cpu(
    out_f: int, in_f: int, r: int, alpha: int, rslora: bool, seed: int
) -> None:
    g = torch.Generator().manual_seed(seed)
    w, a, b = (
        torch.randn(*s, generator=g, dtype=torch.float64) for s in ((out_f, in_f), (r, in_f), (out_f, r))
    )
    cfg = {"r": r, "lora_alpha": alpha, "use_rslora": rslora}
    got = merge_lora(
        {"m.weight": w}, {"base_model.model.m.lora_A.default.weight": a, "m.lora_B.weight": b}, cfg
    )
    s = alpha / (r**0.5 if rslora else r)
    want = torch.tensor(_loop_merge(w.tolist(), a.tolist(), b.tolist(), s), dtype=torch.float64)
    assert set(got) == {"m.weight"} and got["m.weight"].dtype == torch.float64
    assert torch.allclose(got["m.weight"], want, atol=1e-5)


def test_patterns_and_conv1d_layout_cpu() -> None:
    cfg = LoraConfig.from_dict(
        {"r": 8, "lora_alpha": 16, "rank_pattern": {"v_proj": 4}, "alpha_pattern": {"layers.1.q_proj": 2}}
    )
    assert cfg.scaling("model.layers.0.self_attn.q_proj") == 2.0
    assert cfg.scaling("model.layers.0.self_attn.v_proj") == 4.0  # 16 / 4
    assert cfg.scaling("model.layers.1.q_proj") == 0.25  # 2 / 8
    a, b = torch.randn(2, 3), torch.randn(5, 2)
    assert torch.equal(lora_delta(a, b, 1.5, fan_in_fan_out=True), (b @ a * 1.5).T)


def test_bad_adapters_are_one_line_cpu() -> None:
    base = {"m.weight": torch.zeros(4, 3)}
    cfg = {"r": 2, "lora_alpha": 4}
    cases = [
        ({"m.lora_A.weight": torch.zeros(2, 3)}, "not both A and B"),
        ({"m.weight": torch.zeros(4, 3)}, "not a lora_A/lora_B weight"),
        (
            {"x.lora_A.weight": torch.zeros(2, 3), "x.lora_B.weight": torch.zeros(4, 2)},
            "has no weight 'x.weight'",
        ),
        (
            {"m.lora_A.weight": torch.zeros(2, 5), "m.lora_B.weight": torch.zeros(4, 2)},
            "update to a (4, 3) weight",
        ),
    ]
    for adapter, msg in cases:
        with pytest.raises(UserError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            merge_lora(base, adapter, cfg)
    for bad, msg in (
        ({"r": 0}, "rank"),
        ({"r": 2, "use_dora": True}, "DoRA"),
        ({"r": 2, "peft_type": "IA3"}, "not LoRA"),
    ):
        with pytest.raises(UserError, match=msg):
            LoraConfig.from_dict(bad)


def test_names_cpu() -> None:
    assert (
        plain_name("base_model.model.model.layers.0.mlp.up_proj.base_layer.weight")
        == "model.layers.0.mlp.up_proj.weight"
    )
    assert plain_name("model.norm.weight") == "model.norm.weight"
    base, adapter = split_peft_state(
        {
            "base_model.model.lm.base_layer.weight": torch.zeros(1),
            "base_model.model.lm.lora_A.default.weight": torch.zeros(1),
            "base_model.model.norm.weight": torch.zeros(1),
        }
    )
    assert set(base) == {"lm.weight", "norm.weight"} and list(
        adapter_pairs({**adapter, "lm.lora_B.weight": torch.zeros(1)})
    ) == ["lm"]


# ------------------------------------------------------------------------------------- against PEFT itself
@pytest.fixture(scope="module")
def peft_model(tiny_path: str):
    """The tiny model with a trained-looking adapter (B is zero at init; here it is not)."""
    from peft import LoraConfig as PeftConfig
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    cfg = PeftConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM")
    pm = get_peft_model(model, cfg)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    return pm.eval()


def _logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


def test_merge_equals_peft_merge_and_unload_cpu(peft_model, tiny_path: str) -> None:
    from peft.utils import get_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    adapter = get_peft_model_state_dict(peft_model)
    base = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32).state_dict()
    merged = merge_lora(base, adapter, peft_model.peft_config["default"].to_dict())
    ref = copy.deepcopy(peft_model).merge_and_unload().state_dict()  # a copy: the fixture stays unmerged
    assert len(merged) == 14  # 7 linear modules x 2 layers; embeddings, norms and the head untouched
    for k, v in merged.items():
        assert torch.allclose(v, ref[k], atol=1e-6), k
    for k in set(base) - set(merged):
        assert torch.equal(base[k], ref[k]), k
    assert ref.keys() >= merged.keys()


def _save_like_verl_rl(peft_model, folder: Path) -> None:
    """What verl's checkpoint manager writes as ``actor/huggingface`` for a LoRA actor: the PEFT model's full
    state dict, PEFT names included, saved through the plain model class."""
    peft_model.base_model.model.save_pretrained(folder, state_dict=dict(peft_model.state_dict()))
    peft_model.base_model.model.config.save_pretrained(folder)


def test_rl_checkpoint_folder_becomes_the_merged_model_cpu(peft_model, tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    hf = tmp_path / "huggingface"
    _save_like_verl_rl(peft_model, hf)
    assert merge_peft_folder(hf, {"r": 4, "lora_alpha": 8}) == 14
    assert merge_peft_folder(hf, {"r": 4, "lora_alpha": 8}) == 0  # already plain
    ids = torch.tensor([[1, 5, 9, 30, 2]])
    merged = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32)
    want = _logits(peft_model, ids)
    assert torch.allclose(_logits(merged, ids), want, atol=1e-4)
    # the adapter saved beside it is PEFT's format: PEFT loads it on the base and gets the same model
    base = AutoModelForCausalLM.from_pretrained(peft_model.base_model.model.name_or_path, dtype=torch.float32)
    again = PeftModel.from_pretrained(base, hf / ADAPTER_DIR)
    assert torch.allclose(_logits(again, ids), want, atol=1e-4)


def test_sft_export_folder_with_adapter_is_merged_cpu(peft_model, tiny_path: str, tmp_path: Path) -> None:
    """verl's model merger output for a LoRA run: base weights plus lora_adapter/ -> merged in place."""
    import shutil

    from transformers import AutoModelForCausalLM

    folder = tmp_path / "final"
    shutil.copytree(tiny_path, folder)
    peft_model.save_pretrained(folder / ADAPTER_DIR)
    assert merge_adapter_folder(folder) == 14
    ids = torch.tensor([[3, 4, 5]])
    got = _logits(AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32), ids)
    assert torch.allclose(got, _logits(peft_model, ids), atol=1e-4)
    assert merge_adapter_folder(tmp_path / "nothing-here") == 0


def test_adapter_sync_gives_the_rollout_whole_merged_models_cpu(peft_model, tiny_path: str) -> None:
    from peft.utils import get_peft_model_state_dict

    cfg = peft_model.peft_config["default"].to_dict()
    adapter = get_peft_model_state_dict(peft_model)
    # no base sync: the base comes from the model folder
    sync = AdapterSync(tiny_path)
    state = sync.merged(adapter, cfg)
    ref = copy.deepcopy(peft_model).merge_and_unload().state_dict()
    assert set(state) >= set(ref) - {"lm_head.weight"}
    assert all(torch.allclose(state[k], ref[k], atol=1e-6) for k in state)
    assert sync.shift(state) > 0
    zero = {k: torch.zeros_like(v) if "lora_B" in k else v for k, v in adapter.items()}
    assert sync.shift(sync.merged(zero, cfg)) == 0.0
    # a base sync under PEFT's names replaces the folder's copy
    sync2 = AdapterSync("/nonexistent")
    base = {
        f"base_model.model.{k.replace('proj.weight', 'proj.base_layer.weight')}": v
        for k, v in sync.base.items()
    }
    plain = sync2.base_weights(base)
    assert set(plain) == set(sync.base)
    assert all(torch.equal(sync2.merged(adapter, cfg)[k], state[k]) for k in state)


# ------------------------------------------------------------------------------------------------ flags
def test_lora_flags_reach_both_trainers_cpu(tmp_path: Path) -> None:
    data = tmp_path / "d.parquet"
    import pandas as pd
    from conftest import arithmetic_rl_rows

    pd.DataFrame(arithmetic_rl_rows(4)).to_parquet(data)
    samples, _ = generate(8, seed=0)
    sft_data = write_parquet(rows_by_split(samples)["sft"], tmp_path / "sft.parquet")
    r = run(
        "scripts/e2c_rl.sh",
        "--stage",
        "1",
        "--model",
        "tiny",
        "--train-data",
        str(data),
        "--val-data",
        str(data),
        "--output-dir",
        str(tmp_path / "rl"),
        "--lora-rank",
        "8",
        "--lora-targets",
        "q_proj,v_proj",
        "--dry-run",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    for o in (
        "actor_rollout_ref.model.lora_rank=8",
        "actor_rollout_ref.model.lora_alpha=16",
        "'actor_rollout_ref.model.target_modules=[q_proj,v_proj]'",
    ):
        assert o in r.stdout, r.stdout[-2000:]
    assert f"E2C_ROLLOUT_SYNC_LOG={tmp_path / 'rl' / 'rollout_sync.jsonl'}" in r.stdout
    r = run(
        "-m",
        "e2c.sft.run",
        "--model",
        "tiny",
        "--gpus",
        "0",
        "--train-data",
        str(sft_data),
        "--output-dir",
        str(tmp_path / "sft"),
        "--lora-rank",
        "4",
        "--lora-alpha",
        "32",
        "--dry-run",
        env={"E2C_FORCE_CPU": "1"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "model.lora_rank=4 model.lora_alpha=32 model.target_modules=all-linear" in r.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--lora-rank", "-2"], "--lora-rank must be in [0, 65536], got -2"),
        (["--lora-rank", "8", "--lora-alpha", "0"], "--lora-alpha must be >= 1, got 0"),
        (["--lora-rank", "8", "--lora-targets", "q_proj v_proj"], "--lora-targets"),
    ],
)
def test_bad_lora_flags_are_one_line_cpu(args: list[str], needle: str) -> None:
    assert_one_line_error(run("scripts/e2c_rl.sh", "--model", "tiny", *args, "--dry-run"), needle)
    assert_one_line_error(run("-m", "e2c.sft.run", "--model", "tiny", *args, "--dry-run"), needle)
