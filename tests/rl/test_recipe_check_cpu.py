"""e2c.recipe_check: the GPU recipe's configs composed at a cluster size and checked (verl's checks and its
run-time batch arithmetic) without a GPU, each failure one line naming the setting; the time estimate
against a hand computation; and ``DRY_RUN=1 bash scripts/gpu_recipe.sh`` stopping in one line at a bad
size before it prints any command."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from e2c.core.errors import UserError
from e2c.recipe_check import (
    Assumptions,
    Cluster,
    Options,
    RlShape,
    SftShape,
    check_rl,
    model_params,
    params_from_hf_config,
    resolve_gpus,
    rl_config,
    rl_step_seconds,
    run,
    sft_step_seconds,
    total_steps,
    verl_rl_checks,
)

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "scripts" / "gpu_recipe.sh"
N_8B = 8.2e9


def _run(**kw) -> dict[str, tuple[str, float | None]]:
    """run()'s lines and seconds by step."""
    return {step: (line, sec) for step, line, sec in run(Options(**kw))}


def _error(**kw) -> str:
    with pytest.raises(UserError) as e:
        _run(**kw)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


# ------------------------------------------------------------------------------------------------ sizes
@pytest.mark.parametrize("nnodes", [1, 2, 4])
def test_supported_sizes_pass_every_training_stage(nnodes: int) -> None:
    cluster = Cluster(8, nnodes)
    grpo = _run(cluster=cluster, start="sft", params=N_8B)
    for step in ("sft", "rl1", "rl2"):
        assert grpo[step][0].startswith("ok:"), grpo[step]
        assert grpo[step][1] and grpo[step][1] > 0
    assert f"over {8 * nnodes} ranks" in grpo["rl1"][0] and "n=32" in grpo["rl1"][0]
    assert "n=8" in grpo["rl2"][0]
    dapo = _run(cluster=cluster, algo="dapo", start="rl1", params=N_8B)
    assert dapo["rl1"][0].startswith("ok:") and dapo["rl2"][0].startswith("ok:")


def test_three_nodes_break_the_rl_mini_batch() -> None:
    msg = _error(cluster=Cluster(8, 3), start="rl1")
    assert msg.startswith(
        "GRPO stage 1 at 3x8 GPUs: actor_rollout_ref.actor.ppo_mini_batch_size=32 x rollout.n=32"
    )
    assert "1024 samples do not split over 24 data-parallel ranks" in msg
    assert "NNODES=1, 2, 4 or 8" in msg and "multiple of 3" in msg


def test_seven_gpus_break_the_sft_batch() -> None:
    msg = _error(cluster=Cluster(7, 1), start="sft")
    assert msg.startswith("SFT at 1x7 GPUs: data.train_batch_size=160 does not split over 7")
    assert "154 a step, not 160" in msg and "N_GPUS=8" in msg


def test_five_gpus_pass_sft_and_stop_at_stage_one() -> None:
    steps = run(Options(cluster=Cluster(5, 1), start="sft", params=N_8B, verl=False))
    step, line, _ = next(steps)
    assert step == "sft" and line.startswith("ok: 160 rows a step over 5")
    with pytest.raises(UserError, match=r"^GRPO stage 1 at 1x5 GPUs: .*do not split over 5 "):
        next(steps)


def test_a_rollout_tp_that_does_not_divide_the_gpus() -> None:
    msg = _error(
        cluster=Cluster(8, 1),
        start="rl1",
        rl_overrides=("actor_rollout_ref.rollout.tensor_model_parallel_size=3",),
    )
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=3" in msg
    assert "does not divide the 8 GPUs" in msg and "to 1, 2, 4 or 8" in msg


def test_a_mini_batch_override_that_does_not_divide() -> None:
    # Stage 2 (n=8) on 16 ranks: 31 x 8 = 248 samples per mini-batch.
    cfg = rl_config("grpo", 2, Cluster(8, 2), ["actor_rollout_ref.actor.ppo_mini_batch_size=31"])
    with pytest.raises(UserError) as e:
        check_rl(cfg, "GRPO stage 2 at 2x8 GPUs", Cluster(8, 2))
    msg = str(e.value)
    assert "ppo_mini_batch_size=31 x rollout.n=8 = 248 samples do not split over 16" in msg
    assert "multiple of 2" in msg


def test_a_sequence_longer_than_a_dynamic_micro_batch() -> None:
    msg = _error(
        cluster=Cluster(8, 1),
        start="rl1",
        rl_overrides=("actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8000",),
    )
    assert "ppo_max_token_len_per_gpu=8000" in msg and "at least 8912" in msg


def test_verls_own_validation_runs() -> None:
    cfg = rl_config("grpo", 1, Cluster(8, 1), ["actor_rollout_ref.actor.loss_agg_mode=bogus"])
    check_rl(cfg, "x", Cluster(8, 1))  # the arithmetic is fine: verl's dataclass refuses it
    with pytest.raises(
        UserError, match=r"^x: verl\.utils\.config\.validate_config .*Invalid loss_agg_mode: bogus$"
    ):
        verl_rl_checks(cfg, "x")


# ------------------------------------------------------------------------------------------------ estimate
def test_sft_step_matches_a_hand_computation() -> None:
    shape = SftShape(batch=160, max_length=8192, epochs=3, total_steps=None, dp=8)
    tokens = 160 * 4096  # rows x half of max_length
    flops = 6 * 8.2e9 * tokens
    per_gpu = 989e12 * 0.35
    assert sft_step_seconds(N_8B, shape, 8, Assumptions()) == pytest.approx(flops / (8 * per_gpu))


def test_rl_step_matches_a_hand_computation() -> None:
    shape = RlShape(256, 32, 712, 8192, 1, None, 1, False, 8, 256 * 32)
    a = Assumptions()
    phases = rl_step_seconds(N_8B, shape, 8, a)
    samples = 256 * 32
    generated = samples * 4096
    scored = samples * (712 + 4096)
    assert phases["generation"] == pytest.approx(2 * 8.2e9 * generated / (8 * 989e12 * 0.05))
    assert phases["log-probs"] == pytest.approx(2 * 8.2e9 * scored / (8 * 989e12 * 0.35))
    assert phases["training"] == pytest.approx(6 * 8.2e9 * scored / (8 * 989e12 * 0.35))
    with_ref = rl_step_seconds(N_8B, RlShape(256, 32, 712, 8192, 1, None, 1, True, 8, samples), 8, a)
    assert with_ref["log-probs"] == pytest.approx(2 * phases["log-probs"])
    dapo = rl_step_seconds(N_8B, shape, 8, a, gen_batches=2.0)
    assert dapo["generation"] == pytest.approx(2 * phases["generation"])


def test_stage_estimates_from_the_composed_configs() -> None:
    """The paper's 1x8 run: the configs' batch, n, lengths and epochs reach the estimate."""
    lines = _run(cluster=Cluster(8, 1), start="sft", params=N_8B, sft_rows=58_000, rl_prompts=14_000)
    train, decode = 8 * 989e12 * 0.35, 8 * 989e12 * 0.05
    sft_step = 6 * 8.2e9 * 160 * 4096 / train
    assert lines["sft"][1] == pytest.approx((58_000 // 160) * 3 * sft_step)
    for step, n, epochs in (("rl1", 32, 1), ("rl2", 8, 2)):
        gen = 2 * 8.2e9 * 256 * n * 4096 / decode
        scored = 256 * n * (712 + 4096)
        per = gen + 2 * 8.2e9 * scored / train + 6 * 8.2e9 * scored / train
        assert lines[step][1] == pytest.approx((14_000 // 256) * epochs * per), step
    assert (
        "1,086 steps" in lines["sft"][0] and "54 steps" in lines["rl1"][0] and "108 steps" in lines["rl2"][0]
    )
    eval_tokens = (30 + 30 + 40 + 1319 + 500 + 272 + 674 + 1187) * 8 * 4096
    assert lines["eval"][1] == pytest.approx(2 * 8.2e9 * eval_tokens / decode)
    assert lines["tts"][1] is None and "unknown" in lines["tts"][0]


def test_steps_and_parameters() -> None:
    assert total_steps(14_000, 256, 2, None) == 108 and total_steps(14_000, 256, 2, 5) == 5
    qwen3_8b = {
        "hidden_size": 4096,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 12288,
        "vocab_size": 151936,
    }
    layer = 4096 * 32 * 128 * 2 + 4096 * 8 * 128 * 2 + 3 * 4096 * 12288 + 2 * 4096
    assert params_from_hf_config(qwen3_8b) == 36 * layer + 2 * 151936 * 4096 + 4096
    assert model_params("Qwen/Qwen3-4B")[0] == 4.0e9
    assert model_params("nobody/some-model")[0] is None


def test_a_local_model_folder_gives_its_parameters(tmp_path: Path) -> None:
    cfg = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "vocab_size": 100, "tie_word_embeddings": True}))
    layer = 2 * 64 * 64 + 2 * 64 * 64 + 3 * 64 * 128 + 2 * 64
    assert model_params(str(tmp_path)) == (2 * layer + 100 * 64 + 64, str(tmp_path / "config.json"))


def test_auto_gpus_are_the_ones_the_steps_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2C_FORCE_CPU", raising=False)
    monkeypatch.delenv("N_GPUS", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert resolve_gpus("auto") == 4 and resolve_gpus("8") == 8
    monkeypatch.setenv("N_GPUS", "2")
    assert resolve_gpus("auto") == 2
    monkeypatch.setenv("N_GPUS", "8")
    with pytest.raises(UserError, match="N_GPUS=8 but 4 GPU"):
        resolve_gpus("auto")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert resolve_gpus("auto") == 0  # no GPU: a real run's steps run their CPU set-up, nothing to check
    with pytest.raises(UserError, match="--gpus"):
        resolve_gpus("eight")


# ------------------------------------------------------------------------------------------------ recipe
def _recipe(**env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "DRY_RUN": "1", **env}
    return subprocess.run(
        ["bash", str(RECIPE)], env=full, capture_output=True, text=True, timeout=120, cwd="/"
    )


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_dry_run_checks_a_good_size_first() -> None:
    r = _recipe(N_GPUS="8", NNODES="2")
    assert r.returncode == 0, r.stderr[-2000:]
    # progress is stdout's, with the commands: stderr is for an error line alone
    assert r.stderr == "", r.stderr[-2000:]
    for step in ("sft", "rl1", "rl2"):
        assert f"[recipe-check] {step}: ok:" in r.stdout
    assert "2x8 GPUs" in r.stdout and "ESTIMATE" in r.stdout
    assert r.stdout.index("[recipe-check]") < r.stdout.index("[recipe] step data")
    assert len([ln for ln in r.stdout.splitlines() if ln.startswith("+ ")]) == 6


def test_dry_run_stops_in_one_line_at_a_bad_size() -> None:
    r = _recipe(N_GPUS="7", NNODES="1")
    assert r.returncode == 2
    # the check's progress before the bad step ("[recipe-check] data: ...") is on stdout, not beside the error
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    assert "data.train_batch_size=160" in lines[0]
    assert "Traceback" not in r.stderr + r.stdout
    assert "[recipe-check] data:" in r.stdout
    assert "+ " not in r.stdout and "[recipe] step" not in r.stdout  # nothing printed, nothing queued
