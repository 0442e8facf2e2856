"""The RL memory estimate (e2c/rl/memory.py): the formula against a plain reference, its monotonicity, its
calibration against the quickstart's measured runs, what it reads from a composed config and from the
machine, and the one-line refusal of the launcher and the quickstart (exit 2, before anything starts)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import arithmetic_rl_rows

from e2c.core.errors import UserError
from e2c.rl import memory
from e2c.rl.memory import GIB, Limit, ModelShape, RunPlan

ROOT = Path(__file__).resolve().parents[2]

# The embedded SmolLM2-135M with the four chain tags (what e2c.core.models builds).
SMOLLM2 = ModelShape(
    params=134_517_312,
    vocab=49_156,
    hidden=576,
    intermediate=1536,
    layers=30,
    kv_heads=3,
    head_dim=64,
    heads=9,
)
# The machine of the calibration runs: 23.54 GiB, about 0.9 GiB used by an idle system.
CALIBRATION = Limit(total=int(23.54 * GIB), available=int(22.64 * GIB), threshold=0.95, source="test")


def quickstart_plan(samples: int, **kw) -> RunPlan:
    """The quickstart's RL step (prompt room 264 + responses up to 320 tokens, one mini-batch, one rank)."""
    base = dict(
        samples=samples,
        update_samples=samples,
        step_samples=samples,
        longest=584,
        dynamic=False,
        train_budget=2048,
        infer_budget=2048,
        train_micro=16,
        infer_micro=16,
    )
    return RunPlan(**{**base, **kw})


def reference_estimate(m: ModelShape, p: RunPlan) -> float:
    """The formula of docs/training.md ("Memory on a CPU"), term by term, written out plainly."""
    trained = 4 * m.params if p.lora else 16 * m.params
    copy = p.compute_bytes * m.params  # the copy the forward runs on: bf16 2 bytes, fp32 4
    states = trained / p.ranks + copy
    if p.reference:
        states = states + 4 * m.params / p.ranks + copy
    per_layer = 18.7 * (p.compute_bytes / 2) * (m.hidden + m.intermediate)
    layer_bytes = m.layers * per_layer
    if p.gradient_checkpointing:  # only each layer's input is kept, one layer is recomputed at a time
        layer_bytes = m.layers * 4.0 * m.hidden + per_layer
    if p.fused:
        vocab_train, vocab_infer, chunk = 0.0, 0.0, 512 * m.vocab * 33.0
    else:
        vocab_train = 11.0
        if p.entropy_in_loss and not p.entropy_checkpointing:
            vocab_train = vocab_train + 12.0
        vocab_infer, chunk = 6.7, 0.0
    if p.dynamic:
        train = min(p.train_budget * 1.4, p.update_samples * 0.6 * p.longest)
        infer = min(p.infer_budget * 1.4, p.step_samples * 0.6 * p.longest)
    else:
        train = min(p.train_micro, p.update_samples) * 0.6 * p.longest
        infer = min(p.infer_micro, p.step_samples) * 0.6 * p.longest
    act = chunk + max(train * (layer_bytes + m.vocab * vocab_train), infer * m.vocab * vocab_infer)
    actor = 0.84 * GIB + p.ranks * (states + act)
    if p.rollout_engine == "vllm":
        kv = 2 * GIB
    else:
        kv = p.samples / p.ranks * 0.6 * p.longest * m.layers * 2 * m.kv_heads * m.head_dim * p.rollout_bytes
    rollout = 1.65 * GIB + p.ranks * (m.params * p.rollout_bytes + 8 * m.params + kv)
    rest = 4.3 * GIB + (p.ranks - 1) * 0.5 * GIB + p.samples * 8 * 2**20
    return actor + rollout + rest


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"dynamic": True},
        {"dynamic": True, "fused": True},
        {"dynamic": True, "train_budget": 100_000, "update_samples": 8, "step_samples": 8},
        {"ranks": 4, "update_samples": 4, "step_samples": 4, "reference": True},
        {"lora": True, "gradient_checkpointing": True, "entropy_in_loss": True},
        {"entropy_in_loss": True, "entropy_checkpointing": True},
        {"rollout_engine": "hf", "rollout_bytes": 4, "train_micro": 2, "infer_micro": 64},
        {"dynamic": True, "fused": True, "compute_bytes": 4},
        {"gradient_checkpointing": True, "reference": True, "compute_bytes": 4},
    ],
)
def test_estimate_matches_the_plain_formula_cpu(changes: dict) -> None:
    plan = quickstart_plan(32, **changes)
    got = memory.estimate(SMOLLM2, plan)
    assert got.total == pytest.approx(reference_estimate(SMOLLM2, plan), rel=1e-9)
    assert got.total == pytest.approx(got.actor + got.rollout + got.rest)


def test_estimate_grows_with_samples_and_the_token_budget_cpu() -> None:
    for kw in ({"dynamic": True}, {"dynamic": True, "fused": True}, {"dynamic": False}):
        totals = [
            memory.estimate(SMOLLM2, quickstart_plan(s, update_samples=s, step_samples=s, **kw)).total
            for s in (1, 2, 8, 16, 32, 64, 256, 1024)
        ]
        assert totals == sorted(totals) and totals[-1] > totals[0], kw
    budgets = [
        memory.estimate(SMOLLM2, quickstart_plan(64, dynamic=True, train_budget=b, infer_budget=b)).total
        for b in (584, 1024, 2048, 4096, 8192, 16384)
    ]
    assert budgets == sorted(budgets) and budgets[-1] > budgets[0]
    micros = [
        memory.estimate(SMOLLM2, quickstart_plan(64, train_micro=m)).total for m in (1, 2, 4, 8, 16, 32)
    ]
    assert micros == sorted(micros) and micros[-1] > micros[0]
    # a budget past the whole update holds no more tokens than the update has
    whole = [
        memory.estimate(SMOLLM2, quickstart_plan(4, dynamic=True, train_budget=b, infer_budget=b)).total
        for b in (10_000, 100_000)
    ]
    assert whole[0] == whole[1]


def test_calibration_16_fits_32_at_micro_16_does_not_cpu() -> None:
    """The quickstart's measured runs: 2 x 8 samples at a fixed micro-batch of 16 ran; 4 x 8 was killed by
    ray's monitor with the actor-update worker at 12.1 GiB and the rollout server at 4.9 GiB."""
    sixteen = memory.estimate(SMOLLM2, quickstart_plan(16))
    thirty_two = memory.estimate(SMOLLM2, quickstart_plan(32))
    assert sixteen.total <= CALIBRATION.bytes < thirty_two.total
    assert thirty_two.actor / GIB == pytest.approx(12.1, abs=0.1)
    assert thirty_two.rollout / GIB == pytest.approx(4.9, abs=0.1)
    # the node's 22.45 GiB at the kill, less the idle machine's 0.9
    assert thirty_two.total / GIB == pytest.approx(22.45 - 0.9, abs=0.1)
    # The CPU preset now: a 2048-token budget and the fused log-prob kernel fit up to 64 samples with room.
    for samples in (16, 32, 64):
        now = memory.estimate(SMOLLM2, quickstart_plan(samples, dynamic=True, fused=True))
        assert now.total < CALIBRATION.bytes - 3 * GIB, (samples, now.total / GIB)
        assert now.actor < 0.6 * thirty_two.actor


def test_refusal_is_one_line_naming_estimate_limit_and_the_fix_cpu() -> None:
    plan = quickstart_plan(32)
    with pytest.raises(UserError) as err:
        memory.check_run(SMOLLM2, plan, "the run", ["lower X (now 16)"], limit=CALIBRATION)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith("the run needs about 21.6 GiB of memory (actor 12.1, rollout 4.9, rest 4.5;")
    assert "test can give a run 21.5 GiB (22.6 GiB free less 5% of 23.5 GiB kept below ray's memory" in line
    assert line.endswith("lower X (now 16); or pass --no-memory-check (E2C_MEMORY_CHECK=0)")
    fits = memory.check_run(SMOLLM2, quickstart_plan(16), "the run", ["lower X"], limit=CALIBRATION)
    assert fits.total <= CALIBRATION.bytes
    # a machine too small for the run without its micro-batches: lowering them is not offered
    small = Limit(total=8 * GIB, available=8 * GIB, threshold=0.95, source="test")
    with pytest.raises(
        UserError, match=r"the run without its micro-batches .* takes about .* GiB: free memory"
    ):
        memory.check_run(
            SMOLLM2, quickstart_plan(16, dynamic=True, fused=True), "r", ["lower X"], limit=small
        )


def test_model_shape_reads_the_folder_cpu(tiny_path: str, tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    shape = memory.model_shape(tiny_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    assert shape is not None
    assert shape.params == sum(p.numel() for p in model.parameters())  # tied weights counted once
    assert (shape.vocab, shape.hidden, shape.layers) == (
        model.config.vocab_size,
        model.config.hidden_size,
        model.config.num_hidden_layers,
    )
    assert memory.model_shape(tmp_path) is None  # no config.json: not estimated, not refused
    (tmp_path / "config.json").write_text('{"model_type": "mystery"}')
    assert memory.model_shape(tmp_path) is None


def test_machine_limit_reads_meminfo_cgroup_and_ray_settings_cpu(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684084 kB\nMemFree:  1000 kB\nMemAvailable:   23000000 kB\n")
    no_cgroup = tmp_path / "none"
    got = memory.machine_limit({}, meminfo, no_cgroup)
    assert (got.total, got.available, got.threshold) == (24684084 * 1024, 23000000 * 1024, 0.95)
    assert got.bytes == pytest.approx(23000000 * 1024 - 0.05 * 24684084 * 1024)
    assert memory.machine_limit({"RAY_memory_usage_threshold": "0.8"}, meminfo, no_cgroup).threshold == 0.8
    assert memory.machine_limit({"RAY_memory_monitor_refresh_ms": "0"}, meminfo, no_cgroup).threshold == 1.0
    cgroup = tmp_path / "cg"
    cgroup.mkdir()
    (cgroup / "memory.max").write_text(f"{8 * GIB}\n")
    (cgroup / "memory.current").write_text(f"{GIB}\n")
    limited = memory.machine_limit({}, meminfo, cgroup)
    assert (limited.total, limited.available, limited.source) == (8 * GIB, 7 * GIB, "this cgroup")
    (cgroup / "memory.max").write_text("max\n")
    assert memory.machine_limit({}, meminfo, cgroup).total == 24684084 * 1024
    named = memory.machine_limit({"E2C_MEMORY_GIB": "12"}, meminfo, cgroup)
    assert (named.total, named.available, named.source) == (12 * GIB, 12 * GIB, "E2C_MEMORY_GIB=12")
    for bad in ("0", "-3", "lots", "inf"):
        with pytest.raises(UserError, match="E2C_MEMORY_GIB must be a positive number of GiB"):
            memory.machine_limit({"E2C_MEMORY_GIB": bad}, meminfo, cgroup)
    assert memory.check_disabled({"E2C_MEMORY_CHECK": "0"}) and not memory.check_disabled({})


def test_plan_reads_the_composed_cpu_config_cpu() -> None:
    """What the launcher's config gives the estimate: the preset's budget (the log-prob passes follow it
    through verl's defaults), the fused kernel, and a budget raised to the longest sequence."""
    from e2c.rl.launch import planned_cpu_config

    cfg = planned_cpu_config(["data.train_batch_size=4", "actor_rollout_ref.rollout.n=8"])
    plan = memory.plan_from_config(cfg)
    assert (plan.samples, plan.update_samples, plan.longest) == (32, 32, 264 + 128)
    assert plan.dynamic and plan.fused and (plan.train_budget, plan.infer_budget) == (2048, 2048)
    assert not plan.reference and not plan.lora
    cfg = planned_cpu_config(["data.max_response_length=4096"])
    assert memory.plan_from_config(cfg).train_budget == 264 + 4096  # raised: one sequence must fit
    assert cfg.actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu == 264 + 4096
    cfg = planned_cpu_config(["actor_rollout_ref.actor.use_dynamic_bsz=false"])
    fixed = memory.plan_from_config(cfg)
    assert not fixed.dynamic and fixed.train_micro == 4


@pytest.mark.parametrize(("dtype", "nbytes"), [("fp32", 4), ("bf16", 2)])
def test_plan_computes_in_the_cpus_train_dtype_cpu(monkeypatch, dtype: str, nbytes: int) -> None:
    """The planned run computes in E2C_TRAIN_DTYPE, as the launch will; fp32 doubles the activations."""
    from e2c.rl.launch import planned_cpu_config

    monkeypatch.setenv("E2C_TRAIN_DTYPE", dtype)
    plan = memory.plan_from_config(
        planned_cpu_config(["data.train_batch_size=2", "actor_rollout_ref.rollout.n=8"])
    )
    assert plan.compute_bytes == nbytes
    half = memory.estimate(SMOLLM2, dataclasses.replace(plan, compute_bytes=2))
    assert memory.estimate(SMOLLM2, plan).actor - half.actor == pytest.approx(
        (nbytes - 2) * (SMOLLM2.params + half.train_tokens * SMOLLM2.layers * 18.7 / 2 * (576 + 1536))
    )


def _rl_data(tmp_path: Path) -> Path:
    import pandas as pd

    path = tmp_path / "rl.parquet"
    pd.DataFrame(arithmetic_rl_rows(16)).to_parquet(path)
    return path


def _launch(tmp_path: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    data = _rl_data(tmp_path)
    cmd = [sys.executable, "-m", "e2c.rl.launch", "--stage", "1", "--model", "tiny"]
    cmd += ["--train-data", str(data), "--val-data", str(data), "--output-dir", str(tmp_path / "run"), *extra]
    full = {**os.environ, "E2C_CHECK_ONLY": "1", "E2C_FORCE_CPU": "1", **env}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=full, timeout=300)


def test_the_memory_check_is_skipped_when_asked_cpu() -> None:
    """The two ways to skip the check (the flag, the variable), and the launches it does not apply to."""
    from e2c.rl.launch import memory_checked, parse_args

    base = ["--stage", "1", "--model", "tiny"]
    assert memory_checked(parse_args(base), {})
    assert not memory_checked(parse_args([*base, "--no-memory-check"]), {})
    assert not memory_checked(parse_args(base), {"E2C_MEMORY_CHECK": "0"})
    assert not memory_checked(parse_args([*base, "--dry-run"]), {})
    assert not memory_checked(parse_args(base), {"RAY_ADDRESS": "10.0.0.1:6379"})


@pytest.mark.slow  # two real launcher processes, each paying verl's import (about 30 s in all)
def test_launcher_refuses_what_cannot_fit_in_one_line_cpu(tmp_path: Path) -> None:
    res = _launch(tmp_path, E2C_MEMORY_GIB="6")
    assert res.returncode == 2, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert lines[0].startswith("error: GRPO stage 1 at 1x1 GPUs, 16 samples per step needs about ")
    assert "E2C_MEMORY_GIB=6 can give a run 5.7 GiB" in lines[0]
    assert lines[0].endswith("or pass --no-memory-check (E2C_MEMORY_CHECK=0)")
    assert not (tmp_path / "run").exists()
    # The same launch fits where more memory is free (skipping the check: the test above, in-process).
    fits = _launch(tmp_path, E2C_MEMORY_GIB="64")
    assert fits.returncode == 0, fits.stderr[-2000:]
    assert "[e2c-rl] memory: about " in fits.stdout and "E2C_MEMORY_GIB=64 can give a run" in fits.stdout


def test_quickstart_refuses_before_any_stage_cpu(tmp_path: Path) -> None:
    out = tmp_path / "qs"
    env = {**os.environ, "E2C_MEMORY_GIB": "4", "E2C_FORCE_CPU": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "e2c.quickstart", "--fast", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert res.returncode == 2, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr[-2000:]
    assert lines[0].startswith("error: the RL stage (2 prompts x 2 samples per step) needs about ")
    assert lines[0].endswith("set E2C_MEMORY_CHECK=0 to run it anyway")
    assert not out.exists()  # nothing was created


def test_worker_allocator_env_prefers_jemalloc_then_glibcs_threshold_cpu(tmp_path: Path) -> None:
    from e2c.rl.memory import JEMALLOC, find_jemalloc, worker_allocator_env

    lib = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    assert worker_allocator_env({}, jemalloc=lib) == {"LD_PRELOAD": lib}
    # put first, the user's own preloads kept after it
    assert worker_allocator_env({"LD_PRELOAD": "libfoo.so"}, jemalloc=lib) == {
        "LD_PRELOAD": f"{lib}:libfoo.so"
    }
    # yours win: an allocator already preloaded, or glibc's threshold already set, adds nothing
    assert worker_allocator_env({"LD_PRELOAD": lib}, jemalloc=lib) == {}
    assert worker_allocator_env({"LD_PRELOAD": "libtcmalloc_minimal.so.4"}, jemalloc=lib) == {}
    assert worker_allocator_env({"MALLOC_MMAP_THRESHOLD_": "65536"}, jemalloc=lib) == {}
    # no jemalloc on this machine: glibc's threshold
    none = tmp_path / "none"
    none.mkdir()
    assert find_jemalloc([str(none)], bundled=False) is None
    some = tmp_path / "some"
    some.mkdir()
    (some / JEMALLOC).write_bytes(b"")
    assert find_jemalloc([str(none), str(some)]) == str(some / JEMALLOC)


def test_jemalloc_is_found_in_rays_wheel_without_a_system_package_cpu(tmp_path: Path) -> None:
    """A fresh install has no libjemalloc2 but has ray, whose wheel carries jemalloc: the workers get it."""
    from e2c.rl.memory import allocator_line, bundled_jemalloc, find_jemalloc, worker_allocator_env

    bundled = bundled_jemalloc()
    assert bundled is not None and Path(bundled).is_file() and "ray" in Path(bundled).parts
    assert find_jemalloc([str(tmp_path)]) == bundled
    assert find_jemalloc([str(tmp_path)], bundled=False) is None
    assert worker_allocator_env({}, jemalloc=bundled) == {"LD_PRELOAD": bundled}
    assert allocator_line({}, jemalloc=bundled) == f"workers' allocator: jemalloc ({bundled})"
    assert (
        allocator_line({"LD_PRELOAD": "/x/libtcmalloc.so"}) == "workers' allocator: yours (/x/libtcmalloc.so)"
    )


def test_allocator_line_says_when_glibcs_fallback_runs_cpu(monkeypatch) -> None:
    from e2c.rl import memory

    monkeypatch.setattr(memory, "find_jemalloc", lambda dirs=(): None)
    line = memory.allocator_line({})
    assert line.startswith("workers' allocator: glibc with MALLOC_MMAP_THRESHOLD_=1048576 (no jemalloc found")


def test_worker_allocator_env_without_jemalloc_cpu(monkeypatch) -> None:
    from e2c.rl import memory

    monkeypatch.setattr(memory, "find_jemalloc", lambda dirs=(): None)
    assert memory.worker_allocator_env({}) == {"MALLOC_MMAP_THRESHOLD_": str(memory.MMAP_THRESHOLD)}


def test_cpu_launch_gives_the_workers_their_allocator_as_strings_cpu(tmp_path: Path, monkeypatch) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from e2c.rl import memory
    from e2c.rl.launch import build_overrides, parse_args

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    args = parse_args(["--model", "tiny"])
    args.model_path, args.output_dir = "m", tmp_path
    prefix = "+ray_kwargs.ray_init.runtime_env.env_vars."
    for found, key, value in (
        (None, "MALLOC_MMAP_THRESHOLD_", "1048576"),
        ("/opt/my libs/libjemalloc.so.2", "LD_PRELOAD", "/opt/my libs/libjemalloc.so.2"),
    ):
        monkeypatch.setattr(memory, "find_jemalloc", lambda dirs=(), found=found: found)
        [line] = [o for o in build_overrides(args, 0) if o.startswith(prefix + key + "=")]
        [override] = OverridesParser.create().parse_overrides([line])
        assert override.value() == value  # ray refuses an env var that is not a string
        assert not any(o.startswith(prefix + key) for o in build_overrides(args, 2))  # GPU runs: untouched


HOLD_PROBE = """
import json, sys
from e2c.rl.memory import hold_freed_pages, release_freed_pages

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096

def churn():  # 256 MiB touched and freed: jemalloc's dedicated arena for large allocations
    block = bytearray(256 << 20)
    del block

out = {}
churn()
out["default"] = rss()
out["held"] = hold_freed_pages()
churn()
out["holding"] = rss()
out["released"] = release_freed_pages()
out["after"] = rss()
print(json.dumps(out))
"""


def _probe(env: dict[str, str]) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", HOLD_PROBE],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_actor_holds_freed_pages_until_released_cpu() -> None:
    jemalloc = memory.find_jemalloc()
    if jemalloc is None:
        pytest.skip("no jemalloc on this machine (neither the distribution's nor ray's)")
    out = _probe({"LD_PRELOAD": jemalloc})
    assert out["held"] is True and out["released"] is True
    # jemalloc's default gives a large freed block back at once; held, its pages stay; released, they go
    assert out["holding"] - out["default"] > 200 << 20
    assert out["holding"] - out["after"] > 200 << 20
    # glibc: nothing to hold or release, nothing changed
    plain = _probe({"LD_PRELOAD": ""})
    assert plain["held"] is False and plain["released"] is False


def test_matmul_params_are_the_models_linear_weights_cpu(tiny_path: str) -> None:
    """The FLOP count's weights (bench/train_speed.py's floor): every nn.Linear of the model, lm head included."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_path)
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    shape = memory.model_shape(tiny_path)
    assert shape is not None and shape.matmul_params == linear
    # attention on top: 4 x heads x head_dim per key and layer, (len + 1) / 2 keys on average
    extra = shape.forward_flops(10, 5) - 10 * 2 * linear
    assert extra == pytest.approx(10 * shape.layers * 4 * shape.heads * shape.head_dim * 3)
