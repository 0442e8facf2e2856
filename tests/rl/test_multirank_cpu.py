"""The cluster path at its real shape on this CPU: several ranks (N_GPUS becomes CPU processes, FSDP2 over
gloo) and several ray nodes, through the scripts users run.

- SFT with 4 ranks against 1 rank: same data, global batch and seed; the losses and gradient norms agree,
  the checkpoint is sharded over 4 ranks, and ``final/`` is exactly the 4 shards put back together.
- One GRPO step with 2 actor ranks (2 logical GPUs) against 1 rank, the rollout made rank-invariant (one
  replica, the whole batch decoded at once in prompt order, a fixed seed): the same samples, rewards and
  advantages, the same policy loss and gradient norm within a stated tolerance; the sharded actor's
  log-probs of the sampled tokens agree with the unsharded rollout model's; the checkpoint is sharded.
  (2 ranks, so that the step can share the machine with another test; ``bench/multirank.py`` compares 4.)
- Two ray nodes on this machine, started by ``scripts/slurm_e2c.sbatch --nodes 2`` as on a cluster (head,
  worker, ``python -m e2c.launch.cluster`` waiting for both, the driver joining through ``RAY_ADDRESS``), running a
  GRPO step whose 4 ranks and 4 rollout replicas need both nodes' GPUs; its checkpoint is sharded 4 ways.
- The 4-rank SFT run killed once its first sharded checkpoint is written resumes from it and ends with the
  same weights as the run that was not killed.

Times on 2 cores (2026-11-30, the end-to-end tier on 2 workers): the SFT runs ~100 s, the killed one and its
resume ~180 s before they shared the uninterrupted run, the two-node GRPO step ~125 s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import arithmetic_rl_rows, kill_tree
from safetensors.torch import load_file

from e2c.launch.checkpoints import latest_checkpoint

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
SFT_OVERRIDES = ["data.train_batch_size=8", "optim.lr=1e-3", "optim.lr_warmup_steps_ratio=0"]
# bf16 compute: the same global batch split 4 ways is summed in another order. Measured (2026-11-25,
# bench/multirank.py): losses within 0.32% and gradient norms within 0.30% of one rank's.
LOSS_RTOL = 0.02
GRAD_RTOL = 0.02


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "N_GPUS", "RAY_ADDRESS")}
    env.update(E2C_FORCE_CPU="1", TOKENIZERS_PARALLELISM="false", **extra)
    return env


def _ok(cmd: list[str], env: dict[str, str], timeout: int = 600) -> str:
    """Run ``cmd`` in the checkout; it must succeed. Returns its stdout and stderr together."""
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    return log


def _metrics(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines if x.strip()]


def _sft_data(folder: Path) -> Path:
    from e2c.data.io import write_parquet
    from e2c.data.synthetic.generate import generate, rows_by_split

    samples, _ = generate(40, seed=0)
    return write_parquet(rows_by_split(samples)["sft"], folder / "sft.parquet")


def _sft_script(data: Path, out: Path, steps: int, *extra: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["bash", "scripts/e2c_sft.sh", "--logger", "console,file", *SFT_OVERRIDES, *extra],
        cwd=ROOT,
        env=_env(
            MODEL_PATH="tiny",
            TRAIN_DATA=str(data),
            OUTPUT_DIR=str(out),
            TOTAL_TRAINING_STEPS=str(steps),
            **env,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _finish(proc: subprocess.Popen, timeout: int = 400) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-4000:]
    return out


SFT_STEPS = 4
SFT_SAVE = "trainer.save_freq=2"


@pytest.fixture(scope="module")
def sft_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int | str, Path]:
    """The same 4 SFT steps with 1 rank (python -m e2c.sft.run --ranks 1) and with 4 (the paper's N_GPUS=4
    through scripts/e2c_sft.sh, a sharded checkpoint every 2 steps: the whole run the killed one is compared
    with)."""
    tmp = tmp_path_factory.mktemp("multirank_sft")
    data = _sft_data(tmp)
    sft_run = [PY, "-m", "e2c.sft.run", "--model", "tiny", "--steps", str(SFT_STEPS), "--ranks", "1"]
    _ok(
        [
            *sft_run,
            "--train-data",
            str(data),
            "--output-dir",
            str(tmp / "r1"),
            "--logger",
            "console,file",
            *SFT_OVERRIDES,
        ],
        _env(),
        timeout=300,
    )
    log4 = _finish(_sft_script(data, tmp / "r4", SFT_STEPS, SFT_SAVE, N_GPUS="4"))
    assert "N_GPUS=4 and no GPU is visible: 4 CPU rank(s) per node" in log4
    assert "no GPU, 4 CPU rank(s) x 1 node(s)" in log4
    return {1: tmp / "r1", 4: tmp / "r4", "data": data}


@pytest.mark.slow  # real SFT and GRPO runs at 1 and 4 ranks, ray nodes: minutes
def test_four_rank_sft_agrees_with_one_rank_cpu(sft_runs: dict[int | str, Path]) -> None:
    m1, m4 = _metrics(sft_runs[1]), _metrics(sft_runs[4])
    assert [m["step"] for m in m1] == [m["step"] for m in m4] == list(range(1, SFT_STEPS + 1))
    for a, b in zip(m1, m4, strict=True):
        a, b = a["data"], b["data"]
        # The same global batch: every rank's share adds up to one rank's tokens.
        assert a["train/global_tokens"] == b["train/global_tokens"]
        assert b["train/loss"] == pytest.approx(a["train/loss"], rel=LOSS_RTOL)
        assert b["train/grad_norm"] == pytest.approx(a["train/grad_norm"], rel=GRAD_RTOL)
    # Both trained: the loss fell at lr 1e-3.
    assert m4[-1]["data"]["train/loss"] < m4[0]["data"]["train/loss"]


def _shards(step: Path, world: int) -> tuple[dict[str, torch.Tensor], list[dict]]:
    """The trainer's own weights: each rank's FSDP2 shard (dim 0) of every parameter, put back in rank order;
    and the ranks' state dicts as saved."""
    parts = [
        torch.load(step / f"model_world_size_{world}_rank_{r}.pt", map_location="cpu", weights_only=False)
        for r in range(world)
    ]
    full = {}
    for name in parts[0]:
        locals_ = [p[name].to_local() if hasattr(p[name], "to_local") else p[name] for p in parts]
        full[name] = torch.cat(locals_, dim=0)
    return full, parts


@pytest.mark.slow  # real SFT and GRPO runs at 1 and 4 ranks, ray nodes: minutes
def test_four_rank_checkpoint_is_sharded_and_final_is_its_merge_cpu(
    sft_runs: dict[int | str, Path],
) -> None:
    run = sft_runs[4]
    step = latest_checkpoint(run / "verl")
    assert step is not None and step.name == f"global_step_{SFT_STEPS}"
    assert sorted(p.name for p in step.glob("model_world_size_*")) == [
        f"model_world_size_4_rank_{r}.pt" for r in range(4)
    ]
    full, parts = _shards(step, 4)
    # Really sharded: a rank holds a quarter of the rows of a weight whose rows split evenly.
    q = "model.layers.0.self_attn.q_proj.weight"
    assert parts[0][q].to_local().shape[0] * 4 == full[q].shape[0]
    final = {}
    for f in (run / "final").glob("*.safetensors"):
        final.update(load_file(f))
    assert final, "no weights in final/"
    for name, w in final.items():
        # The export casts to its dtype (bf16, as the paper's release); otherwise bit for bit the shards.
        assert torch.equal(full[name].to(w.dtype), w), name
    # Tied embeddings: the one weight final/ leaves out is the output layer, equal to the embeddings.
    missing = set(full) - set(final)
    assert missing <= {"lm_head.weight"}
    if missing:
        assert torch.equal(full["lm_head.weight"], full["model.embed_tokens.weight"])
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(run / "final")
    assert torch.equal(
        model.get_input_embeddings().weight, final["model.embed_tokens.weight"].to(model.dtype)
    )


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_a_batch_that_does_not_split_over_the_ranks_is_one_line_cpu(tmp_path: Path) -> None:
    data = _sft_data(tmp_path)
    proc = _sft_script(data, tmp_path / "r3", 1, "--dry-run", N_GPUS="3")
    out = _finish_fail(proc)
    assert [line for line in out.splitlines() if line.startswith("error:")] == [out.strip().splitlines()[-1]]
    assert "error: SFT at 1x3 GPUs (CPU ranks): data.train_batch_size=8 does not split over 3" in out
    assert "set data.train_batch_size to a multiple of 3, e.g. 9" in out
    assert not (tmp_path / "r3").exists()
    # GRPO: 4 prompts x 4 samples a mini-batch do not split over 3 actor ranks.
    rl = subprocess.run(
        ["bash", "scripts/e2c_rl.sh", "--stage", "1", "--dry-run"],
        cwd=ROOT,
        env=_grpo_env(_rl_data(tmp_path), tmp_path / "rl", N_GPUS="3"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rl.returncode == 2 and "Traceback" not in rl.stderr
    assert (
        "error: GRPO stage 1 at 1x3 GPUs: actor_rollout_ref.actor.ppo_mini_batch_size=4 x rollout.n=4"
        in rl.stderr
    )
    assert not (tmp_path / "rl").exists()


def _finish_fail(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out
    return out


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
@pytest.mark.parametrize("script", ["ef-sft.sh", "e2c_dapo.sh"])
def test_every_training_script_takes_n_gpus_as_cpu_ranks_cpu(tmp_path: Path, script: str, tiny_tok) -> None:
    """The scripts that share these launchers: N_GPUS=4 on this CPU is a 4-rank command (dry run; the
    curriculum calls the RL launcher per stage)."""
    if script == "ef-sft.sh":
        from e2c.data import efsft
        from e2c.data.io import read_rows, write_parquet

        rows, _ = efsft.build(
            read_rows(_sft_data(tmp_path)), efsft.tokenizer_counter(tiny_tok), reg_frac=0.1, seed=0
        )
        data = write_parquet(rows, tmp_path / "ef.parquet")
    else:
        data = _rl_data(tmp_path)
    env = _grpo_env(data, tmp_path / "out", N_GPUS="4")
    out = _ok(["bash", f"scripts/{script}", "--dry-run"], env, timeout=300)
    assert "trainer.n_gpus_per_node=4" in out
    if script == "ef-sft.sh":
        assert "--nproc_per_node=4" in out
    else:
        # 4 logical GPUs for ray; micro-batches packed to the preset's token budget, so none to divide
        assert "+ray_kwargs.ray_init.num_gpus=4" in out
        assert "actor_rollout_ref.actor.use_dynamic_bsz=true" in out


# ---------------------------------------------------------------------------------------------- GRPO
def _rl_data(folder: Path) -> Path:
    path = folder / "rl.parquet"
    pd.DataFrame(arithmetic_rl_rows(16)).to_parquet(path)
    return path


def _grpo_env(data: Path, root: Path, **extra: str) -> dict[str, str]:
    return _env(
        MODEL_PATH="tiny",
        TRAIN_DATA=str(data),
        VAL_DATA=str(data),
        OUTPUT_DIR=str(root),
        TOTAL_TRAINING_STEPS="1",
        **extra,
    )


def _check_grpo_step(run: Path, world: int) -> dict:
    metrics = _metrics(run)
    assert [m["step"] for m in metrics] == [1]
    m = metrics[0]["data"]
    # The FSDP-sharded actor recomputes the log-probs of the tokens the unsharded rollout model sampled.
    assert m["training/rollout_probs_diff_valid"] == 1.0
    assert m["training/rollout_probs_diff_max"] < 1e-2
    step = run / "global_step_1" / "actor"
    assert sorted(p.name for p in step.glob("model_world_size_*")) == [
        f"model_world_size_{world}_rank_{r}.pt" for r in range(world)
    ]
    assert ((run / "final") / "config.json").is_file()
    return m


# Naming verl's vanilla loss keeps the old-log-prob pass (the launcher skips it for one mini-batch per step,
# e2c.rl.launch.on_policy_overrides): these tests compare what the sharded actor computes with the rollout.
OLD_LOG_PROB_PASS = "actor_rollout_ref.actor.policy_loss.loss_mode=vanilla"


def _grpo(data: Path, root: Path, ranks: int, *flags: str) -> str:
    """One GRPO step at ``ranks`` CPU ranks (the paper's N_GPUS) with one rollout replica (tensor-parallel
    size = the ranks) that waits for the whole batch: the rollout then decodes the same requests as one
    batch in the same order at any rank count, so both runs sample the same tokens (rollout.seed 42)."""
    script = ["bash", "scripts/e2c_rl.sh", "--stage", "1", "--logger", "console,file", *flags, "--"]
    tp = f"actor_rollout_ref.rollout.tensor_model_parallel_size={ranks}"
    return _ok(
        [*script, tp, OLD_LOG_PROB_PASS],
        _grpo_env(data, root, N_GPUS=str(ranks), E2C_ROLLOUT_BATCH_WAIT_S="2"),
    )


# The rank count the GRPO step is compared at: 2, where the step shares the machine with another test; its
# 4 ranks (4 actor processes, ~13 GiB) run once, across two ray nodes, in the test after these.
GRPO_RANKS = 2


@pytest.fixture(scope="module")
def grpo_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    tmp = tmp_path_factory.mktemp("multirank_grpo")
    data = _rl_data(tmp)
    _grpo(data, tmp / "r1", 1, "--save-freq", "-1")  # the reference: no checkpoint needed
    log = _grpo(data, tmp / f"r{GRPO_RANKS}", GRPO_RANKS)
    assert f"N_GPUS={GRPO_RANKS} and no GPU is visible: {GRPO_RANKS} CPU rank(s) per node" in log
    return {1: tmp / "r1" / "stage1-warmup", GRPO_RANKS: tmp / f"r{GRPO_RANKS}" / "stage1-warmup"}


@pytest.mark.slow  # real SFT and GRPO runs at 1 and 2 ranks: minutes
def test_sharded_grpo_step_agrees_with_one_rank_cpu(grpo_runs: dict[int, Path]) -> None:
    (m1,), (mn,) = (_metrics(grpo_runs[w]) for w in (1, GRPO_RANKS))
    assert m1["step"] == mn["step"] == 1
    a, b = m1["data"], mn["data"]
    # The same samples, rewards and GRPO advantages (computed once, on the driver).
    for key in (
        "response_length/mean",
        "critic/score/mean",
        "critic/advantages/max",
        "critic/advantages/min",
    ):
        assert a[key] == b[key], key
    assert a["critic/score/max"] > a["critic/score/min"], (
        "every response scored alike: no advantage to compare"
    )
    assert b["critic/advantages/mean"] == pytest.approx(a["critic/advantages/mean"], rel=1e-5)
    assert b["e2c/adv_abs_after"] == pytest.approx(a["e2c/adv_abs_after"], rel=1e-6)
    # The policy loss and gradient of sharded FSDP ranks against 1. Measured at 4 ranks (2026-11-25): pg_loss
    # equal to 2e-9 relative, grad_norm to 1e-4 (the gradient is reduced over gloo in another order).
    assert b["actor/pg_loss"] == pytest.approx(a["actor/pg_loss"], rel=1e-4)
    assert b["actor/grad_norm"] == pytest.approx(a["actor/grad_norm"], rel=1e-3)
    assert b["actor/entropy"] == pytest.approx(a["actor/entropy"], rel=1e-3)


@pytest.mark.slow  # real SFT and GRPO runs at 1 and 2 ranks: minutes
def test_sharded_grpo_checkpoint_cpu(grpo_runs: dict[int, Path]) -> None:
    m = _check_grpo_step(grpo_runs[GRPO_RANKS], GRPO_RANKS)
    assert m["response_length/mean"] > 0


@pytest.mark.slow  # a GRPO step at 4 ranks on two ray nodes: minutes
@pytest.mark.alone  # 4 actor ranks and 2 ray nodes on one machine: ~13 GiB
def test_two_ray_nodes_run_one_grpo_step_cpu(tmp_path: Path) -> None:
    """slurm_e2c.sbatch outside Slurm with --nodes 2: a ray head and a worker on this machine, 2 logical
    GPUs each; the step's 4 ranks fit only on both nodes together."""
    data, out = _rl_data(tmp_path), tmp_path / "grpo"
    sbatch = ["bash", "scripts/slurm_e2c.sbatch", "--nodes", "2", "grpo", "--stage", "1"]
    log = _ok(
        [*sbatch, "--output-dir", str(out), "--logger", "console,file", "--", OLD_LOG_PROB_PASS],
        _grpo_env(data, out, N_GPUS="2", GPUS_PER_NODE="0", RAY_PORT="6393", RAY_WAIT_S="120"),
    )
    assert "[e2c-cluster] 2 of 2 node(s) up" in log
    # the driver joined the script's cluster instead of starting its own
    assert "Using address 127.0.0.1:6393 set in the environment variable RAY_ADDRESS" in log
    assert re.search(r"Connecting to existing Ray cluster at address: [\d.]+:6393", log)
    assert "--num-gpus=2" in log
    _check_grpo_step(out, 4)
    gone = subprocess.run(
        [PY, "-m", "e2c.launch.cluster", "--address", "127.0.0.1:6393", "--timeout", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert gone.returncode == 1, "the ray nodes outlived the script"
    # and left no record of itself for the next plain ray.init() on this machine to join
    current = Path("/tmp/ray/ray_current_cluster")
    assert not current.is_file() or not current.read_text().strip().endswith(":6393")


# ---------------------------------------------------------------------------------------------- resume
@pytest.mark.slow  # ~1.5 min: bash scripts/test.sh -m slow
def test_killed_four_rank_sft_resumes_to_the_same_weights_cpu(
    sft_runs: dict[int | str, Path], tmp_path: Path
) -> None:
    """The 4-rank run of :func:`sft_runs`, killed (the whole process group, as a lost node or a scheduler
    would) once its first sharded checkpoint is on disk, then started again with the same command, ends with
    the weights of the run that was never killed."""
    data, steps = sft_runs["data"], SFT_STEPS
    proc = _sft_script(data, tmp_path / "cut", steps, SFT_SAVE, N_GPUS="4")
    deadline = time.monotonic() + 300
    while latest_checkpoint(tmp_path / "cut" / "verl") is None:
        assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint before the run ended"
        time.sleep(0.2)
    kill_tree(proc.pid)  # torchrun's workers have sessions of their own: a group kill leaves them running
    proc.wait()
    cut_at = latest_checkpoint(tmp_path / "cut" / "verl")
    assert int(cut_at.name.rsplit("_", 1)[1]) < steps and not (tmp_path / "cut" / "final").exists()
    _finish(_sft_script(data, tmp_path / "cut", steps, SFT_SAVE, N_GPUS="4"))
    whole, _ = _shards(sft_runs[4] / "verl" / f"global_step_{steps}", 4)
    resumed, _ = _shards(tmp_path / "cut" / "verl" / f"global_step_{steps}", 4)
    assert whole.keys() == resumed.keys()
    for name in whole:
        assert torch.equal(whole[name], resumed[name]), name


@pytest.mark.slow  # ~1 min: bash scripts/test.sh -m slow
def test_two_torchrun_nodes_run_sft_cpu(tmp_path: Path) -> None:
    """slurm_e2c.sbatch outside Slurm with --nodes 2 for SFT: two torchrun launchers on this machine
    (NODE_RANK 0 and 1, rendezvous on 127.0.0.1), 2 ranks each, one 4-rank run; node 0 exports final/, node 1
    logs to its own file and leaves the metrics to node 0."""
    data, out = _sft_data(tmp_path), tmp_path / "sft"
    sbatch = ["bash", "scripts/slurm_e2c.sbatch", "--nodes", "2", "sft", "--model", "tiny", "--steps", "2"]
    log = _ok(
        [
            *sbatch,
            "--train-data",
            str(data),
            "--output-dir",
            str(out),
            "--logger",
            "console,file",
            *SFT_OVERRIDES,
        ],
        _env(N_GPUS="2", GPUS_PER_NODE="0", MASTER_PORT="29611"),
    )
    assert "no GPU, 2 CPU rank(s) x 2 node(s)" in log
    step = latest_checkpoint(out / "verl")
    assert step is not None and step.name == "global_step_2"
    assert len(list(step.glob("model_world_size_4_rank_*.pt"))) == 4
    assert [m["step"] for m in _metrics(out)] == [1, 2]
    assert (out / "final" / "config.json").is_file() and (out / "train.node1.log").is_file()
