"""How much host memory a CPU RL run needs, estimated before it starts, and the check that refuses one that
cannot fit (``python -m e2c.rl.launch`` and the quickstart's ``validate`` both call :func:`check_run`).

A CPU run that does not fit does not fail cleanly: ray's memory monitor kills a worker minutes in. This module
turns the run's shape (model sizes, samples, lengths, token budget, ranks, rollout engine) into an estimate in
bytes (actor + rollout + rest, from the calibrated constants here), compares it with what ray's monitor leaves
a run (MemAvailable less ``(1 - threshold) * MemTotal``, or a lower cgroup v2 ``memory.max``), and says in one
line what to change. The estimate is meant to stay above the real peak. Not checked: GPU runs, and a driver
that joins a ray cluster (``RAY_ADDRESS``). ``bench/rl_memory.py`` records real peaks to refit the constants.
More: docs/training.md, "Memory on a CPU" (the formula and its calibration).
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2c.core.env import env_switch
from e2c.core.errors import UserError
from e2c.launch.batch_shapes import longest_sequence, padded_samples
from e2c.verl_cpu.hf_rollout import rollout_dtype
from e2c.verl_cpu.rollout_engine import ROLLOUT_KV_CACHE_GIB, rollout_engine

GIB = 2**30
MIB = 2**20

# -- constants (docs/training.md, "Memory on a CPU", says where each comes from) ------------------------
ACT = 18.7  # bytes per (hidden + MLP width) unit, per layer, per padded token of the update
CKPT = 4.0  # bytes per hidden unit per layer per token with gradient checkpointing (the fp32 layer input)
# bytes per vocabulary entry per padded token of the update (the logits, their rows, log-softmax, grads)
VOCAB_TRAIN = 11.0
# bytes per vocabulary entry per token of a log-prob pass (the logits and the entropy's softmax)
VOCAB_INFER = 6.7
VOCAB_ENTROPY = 12.0  # extra per entry when the loss has an entropy term (its fp32 softmax kept for backward)
FUSED_CHUNK = 512  # tokens per chunk of verl's fused log-prob kernel (FusedLinearForPPO's default)
FUSED_BYTES = 33.0  # bytes per vocabulary entry per chunk token: its fp32 logits, softmax and gradients
STATE_FULL = 16  # bytes per parameter of a trained model: fp32 weights, grads, AdamW m and v
STATE_FROZEN = 4  # bytes per parameter of a frozen one (LoRA's base, the reference model): fp32 weights
# bytes per parameter of the bf16 copy the forward runs on (twice that in fp32: RunPlan.compute_bytes)
COMPUTE_COPY = 2
WEIGHT_COPY = 4  # bytes per parameter of an fp32 copy in the rollout server
FILL = 0.6  # a micro-batch's longest sequence over the prompt + response limit
PAD = 1.4  # a dynamic micro-batch's padded tokens over its real ones
ACTOR_RUNTIME = 0.84 * GIB
ROLLOUT_RUNTIME = 1.65 * GIB
REST_RUNTIME = 4.3 * GIB  # ray's daemons, the driver, agent-loop, reward and transfer-queue workers
REST_PER_SAMPLE = 8 * MIB
EXTRA_RANK = 0.5 * GIB

RAY_THRESHOLD = 0.95  # ray's memory monitor kills a worker above this share of the node's memory
THRESHOLD_ENV = "RAY_memory_usage_threshold"
MONITOR_ENV = "RAY_memory_monitor_refresh_ms"  # 0 turns ray's monitor off
CHECK_ENV = "E2C_MEMORY_CHECK"  # 0: do not check (what --no-memory-check does)
MEMORY_ENV = "E2C_MEMORY_GIB"  # check against a machine with this many GiB free instead of this one
NO_CHECK_HINT = f"--no-memory-check ({CHECK_ENV}=0)"


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a model: its size and the dimensions its activations scale with."""

    params: int
    vocab: int
    hidden: int
    intermediate: int
    layers: int
    kv_heads: int
    head_dim: int
    heads: int

    @property
    def matmul_params(self) -> int:
        """Weights every token multiplies by: each layer's projections and MLP, and the lm head."""
        h, d = self.hidden, self.head_dim
        attention = h * self.heads * d * 2 + h * self.kv_heads * d * 2
        return self.layers * (attention + 3 * h * self.intermediate) + self.vocab * h

    def forward_flops(self, tokens: float, mean_len: float) -> float:
        """Forward FLOPs of ``tokens`` real tokens in sequences of ``mean_len``: 2 per weight and token, and
        causal attention (scores and values, 2 x 2 x heads x head_dim per key, (len + 1) / 2 keys on average)."""
        attention = self.layers * 4 * self.heads * self.head_dim * (mean_len + 1) / 2
        return tokens * (2 * self.matmul_params + attention)


@dataclass(frozen=True)
class RunPlan:
    """What one RL step is, as far as memory goes (read from the composed config: :func:`plan_from_config`)."""

    samples: int  # responses per step: data.train_batch_size x rollout.n
    update_samples: int  # samples per rank of one mini-batch (what the update splits into micro-batches)
    step_samples: int  # samples per rank of a whole step (what a log-prob pass splits)
    longest: int  # prompt + response tokens of the longest sequence
    dynamic: bool  # micro-batches packed to a token budget (verl's use_dynamic_bsz)
    train_budget: int  # ppo_max_token_len_per_gpu (dynamic)
    infer_budget: int  # the log-prob passes' budget (the larger of the rollout's and the reference's)
    train_micro: int  # ppo_micro_batch_size_per_gpu (fixed)
    infer_micro: int  # log_prob_micro_batch_size_per_gpu (fixed)
    ranks: int = 1
    gradient_checkpointing: bool = False
    entropy_in_loss: bool = False
    entropy_checkpointing: bool = False
    fused: bool = False  # verl's fused log-prob kernel: the logits a chunk at a time
    reference: bool = False
    lora: bool = False
    rollout_engine: str = "vllm"  # vllm | hf
    rollout_bytes: int = 2  # bytes per weight of the rollout's model (bf16 2, fp32 4)
    kv_cache_bytes: int = ROLLOUT_KV_CACHE_GIB * GIB  # vLLM's preallocated KV cache per replica
    compute_bytes: int = 2  # bytes per value the update computes in (FSDP's param_dtype: bf16 2, fp32 4)


@dataclass(frozen=True)
class Estimate:
    """Peak resident bytes of a run: its actor workers, rollout servers and everything else."""

    actor: float
    rollout: float
    rest: float
    train_tokens: float  # padded tokens of one update micro-batch (what the token budget bounds)
    activations: float  # the part of ``actor`` that the micro-batch's size sets (all ranks)

    @property
    def total(self) -> float:
        return self.actor + self.rollout + self.rest

    def parts(self) -> str:
        """``actor 7.9, rollout 5.2, rest 4.4`` (GiB)."""
        return f"actor {self.actor / GIB:.1f}, rollout {self.rollout / GIB:.1f}, rest {self.rest / GIB:.1f}"


@dataclass(frozen=True)
class Limit:
    """What this machine can give a run before ray's monitor kills it."""

    total: int  # MemTotal (or the cgroup's limit)
    available: int  # MemAvailable at launch
    threshold: float  # ray's monitor line, a share of total
    source: str  # where the numbers come from, for the error line

    @property
    def bytes(self) -> float:
        return self.available - (1.0 - self.threshold) * self.total


# -- the model ------------------------------------------------------------------------------------------
def _text_config(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a config.json (multimodal configs nest it)."""
    inner = cfg.get("text_config")
    return inner if isinstance(inner, Mapping) and "hidden_size" in inner else cfg


def shape_from_config(cfg: Mapping[str, Any], params: int | None = None) -> ModelShape:
    """A :class:`ModelShape` from a model's ``config.json`` contents; ``params`` (the weights' count) when
    known, else counted from the dimensions as a Llama-shaped decoder.

    >>> s = shape_from_config({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    ...     "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 516, "tie_word_embeddings": True})
    >>> s.params, s.head_dim
    (107072, 16)
    """
    c = _text_config(cfg)
    hidden = int(c.get("hidden_size") or c.get("n_embd") or c.get("d_model"))
    layers = int(c.get("num_hidden_layers") or c.get("n_layer"))
    heads = int(c.get("num_attention_heads") or c.get("n_head") or 1)
    kv_heads = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or hidden // heads)
    intermediate = int(c.get("intermediate_size") or c.get("n_inner") or 4 * hidden)
    vocab = int(c.get("vocab_size"))
    if params is None:
        attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
        per_layer = attention + 3 * hidden * intermediate + 2 * hidden
        tied = bool(cfg.get("tie_word_embeddings", c.get("tie_word_embeddings", False)))
        params = layers * per_layer + vocab * hidden * (1 if tied else 2) + hidden
    return ModelShape(
        params=params,
        vocab=vocab,
        hidden=hidden,
        intermediate=intermediate,
        layers=layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        heads=heads,
    )


def safetensors_params(folder: Path) -> int | None:
    """Parameters stored in a folder's ``*.safetensors`` files, from their headers (no weights are read);
    None when it has none or one is unreadable."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    try:
        for f in files:
            with f.open("rb") as fh:
                (size,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(size))
            for name, entry in header.items():
                if name != "__metadata__":
                    count = 1
                    for d in entry["shape"]:
                        count *= int(d)
                    total += count
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    return total


def model_shape(folder: str | Path) -> ModelShape | None:
    """The shape of the model in ``folder`` (its ``config.json``, and its weight headers for the count);
    None when its config does not say (an architecture without the usual keys: not estimated)."""
    folder = Path(folder)
    try:
        cfg = json.loads((folder / "config.json").read_text())
        return shape_from_config(cfg, safetensors_params(folder))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


# -- the run --------------------------------------------------------------------------------------------
def _select(cfg: Any, key: str, default: Any = None) -> Any:
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, key, default=default)
    return default if value is None else value


def plan_from_config(cfg: Any, rollout_engine: str = "vllm", rollout_bytes: int = 2) -> RunPlan:
    """The :class:`RunPlan` of a composed RL config (what :func:`e2c.launch.checks.compose_checked`
    returns, sizes checked there; the batch split checked by :func:`e2c.launch.batch_shapes.check_rl`)."""

    actor = "actor_rollout_ref.actor"
    world = int(_select(cfg, "trainer.n_gpus_per_node", 1)) * int(_select(cfg, "trainer.nnodes", 1))
    n = int(_select(cfg, "actor_rollout_ref.rollout.n", 1))
    batch = int(_select(cfg, "data.train_batch_size"))
    mini = int(_select(cfg, f"{actor}.ppo_mini_batch_size", batch)) * n
    samples = batch * n
    budget = int(_select(cfg, f"{actor}.ppo_max_token_len_per_gpu", 16384))
    infer = [
        int(_select(cfg, f"actor_rollout_ref.{k}.log_prob_max_token_len_per_gpu", budget))
        for k in ("rollout", "ref")
    ]
    micro = int(_select(cfg, f"{actor}.ppo_micro_batch_size_per_gpu", 1) or 1)
    infer_micro = max(
        int(_select(cfg, f"actor_rollout_ref.{k}.log_prob_micro_batch_size_per_gpu", micro) or micro)
        for k in ("rollout", "ref")
    )
    entropy = float(_select(cfg, f"{actor}.entropy_coeff", 0.0)) != 0.0 or bool(
        _select(cfg, f"{actor}.calculate_entropy", False)
    )
    lora = int(_select(cfg, "actor_rollout_ref.model.lora_rank", 0) or 0) > 0
    kl = bool(_select(cfg, f"{actor}.use_kl_loss", False)) or bool(
        _select(cfg, "algorithm.use_kl_in_reward", False)
    )
    compute = str(_select(cfg, f"{actor}.fsdp_config.mixed_precision.param_dtype", "bf16") or "bf16")
    return RunPlan(
        samples=samples,
        update_samples=max(1, mini // world),
        step_samples=max(1, padded_samples(samples, world, mini) // world),
        longest=longest_sequence(cfg),
        dynamic=bool(_select(cfg, f"{actor}.use_dynamic_bsz", False)),
        train_budget=budget,
        infer_budget=max(infer),
        train_micro=micro,
        infer_micro=infer_micro,
        ranks=world,
        gradient_checkpointing=bool(
            _select(cfg, "actor_rollout_ref.model.enable_gradient_checkpointing", False)
        ),
        entropy_in_loss=entropy,
        entropy_checkpointing=bool(_select(cfg, f"{actor}.entropy_checkpointing", False)),
        fused=bool(_select(cfg, "actor_rollout_ref.model.use_fused_kernels", False)),
        reference=kl and not lora,  # LoRA's reference is the base with the adapter off: no second model
        lora=lora,
        rollout_engine=rollout_engine,
        rollout_bytes=rollout_bytes,
        compute_bytes=4 if compute.lower() in ("fp32", "float32") else 2,
    )


# -- the estimate ---------------------------------------------------------------------------------------
def micro_tokens(budget: int, micro: int, samples: int, longest: int, dynamic: bool) -> float:
    """Padded tokens of one micro-batch: a dynamic one holds up to ``budget`` real tokens (``PAD`` times
    as many padded), a fixed one ``micro`` sequences padded to their longest; neither more than the
    ``samples`` there are.

    >>> micro_tokens(2048, 16, 32, 584, True), round(micro_tokens(2048, 16, 32, 584, False), 1)
    (2867.2, 5606.4)
    """
    whole = samples * FILL * longest
    if dynamic:
        return min(budget * PAD, whole)
    return min(micro, samples) * FILL * longest


def estimate(model: ModelShape, plan: RunPlan) -> Estimate:
    """The peak resident bytes of an RL run of ``model`` shaped as ``plan`` on one machine without a GPU
    (the formula of docs/training.md, "Memory on a CPU")."""
    p, r = model.params, plan.ranks
    # ACT and COMPUTE_COPY were measured in bf16: an fp32 update (a CPU without native bf16) holds twice both
    scale = plan.compute_bytes / 2
    states = (STATE_FROZEN if plan.lora else STATE_FULL) * p / r + COMPUTE_COPY * scale * p
    if plan.reference:
        states += STATE_FROZEN * p / r + COMPUTE_COPY * scale * p
    width = model.hidden + model.intermediate
    if plan.gradient_checkpointing:  # saved inputs (fp32) + one layer recomputed
        layers = model.layers * CKPT * model.hidden + ACT * scale * width
    else:
        layers = model.layers * ACT * scale * width
    if plan.fused:  # the logits (and the entropy's softmax) exist one chunk at a time
        vocab, vocab_infer, chunk = 0.0, 0.0, FUSED_CHUNK * model.vocab * FUSED_BYTES
    else:
        entropy = plan.entropy_in_loss and not plan.entropy_checkpointing
        vocab, vocab_infer, chunk = VOCAB_TRAIN + (VOCAB_ENTROPY if entropy else 0.0), VOCAB_INFER, 0.0
    train = micro_tokens(plan.train_budget, plan.train_micro, plan.update_samples, plan.longest, plan.dynamic)
    infer = micro_tokens(plan.infer_budget, plan.infer_micro, plan.step_samples, plan.longest, plan.dynamic)
    activations = chunk + max(train * (layers + model.vocab * vocab), infer * model.vocab * vocab_infer)
    actor = ACTOR_RUNTIME + r * (states + activations)
    if plan.rollout_engine == "vllm":
        kv = float(plan.kv_cache_bytes)
    else:  # transformers: the cache of the replica's batch, as long as its sequences get
        per_token = model.layers * 2 * model.kv_heads * model.head_dim * plan.rollout_bytes
        kv = plan.samples / r * FILL * plan.longest * per_token
    replica = p * plan.rollout_bytes + 2 * WEIGHT_COPY * p + kv
    rollout = ROLLOUT_RUNTIME + r * replica
    rest = REST_RUNTIME + (r - 1) * EXTRA_RANK + plan.samples * REST_PER_SAMPLE
    return Estimate(actor=actor, rollout=rollout, rest=rest, train_tokens=train, activations=r * activations)


# -- the machine ----------------------------------------------------------------------------------------
def _meminfo(path: Path) -> dict[str, int]:
    out = {}
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            out[key] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return out


def _cgroup_limit(root: Path) -> tuple[int, int] | None:
    """(limit, usage) of this process's cgroup v2 memory, or None when it sets no limit."""
    try:
        limit = (root / "memory.max").read_text().strip()
        usage = int((root / "memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    return (int(limit), usage) if limit.isdigit() else None


def ray_threshold(env: Mapping[str, str] | None = None) -> float:
    """The share of the node's memory above which ray's monitor kills workers (1.0 when it is off)."""
    env = os.environ if env is None else env
    if env.get(MONITOR_ENV, "").strip() == "0":
        return 1.0
    raw = env.get(THRESHOLD_ENV, "").strip()
    try:
        value = float(raw) if raw else RAY_THRESHOLD
    except ValueError:
        return RAY_THRESHOLD  # ray itself refuses a bad value at start; not this check's to name
    return value if 0.0 < value <= 1.0 else RAY_THRESHOLD


def machine_limit(
    env: Mapping[str, str] | None = None,
    meminfo: Path = Path("/proc/meminfo"),
    cgroup: Path = Path("/sys/fs/cgroup"),
) -> Limit:
    """What this machine can give a run now: ``/proc/meminfo`` (or a smaller cgroup v2 limit) and ray's
    threshold; ``E2C_MEMORY_GIB`` instead names the free memory of the machine to check against (a machine
    that size with nothing else running)."""
    env = os.environ if env is None else env
    threshold = ray_threshold(env)
    raw = env.get(MEMORY_ENV, "").strip()
    if raw:
        try:
            gib = float(raw)
        except ValueError:
            gib = -1.0
        if not gib > 0 or gib == float("inf"):
            raise UserError(f"{MEMORY_ENV} must be a positive number of GiB, got {raw!r}")
        size = int(gib * GIB)
        return Limit(size, size, threshold, f"{MEMORY_ENV}={raw}")
    info = _meminfo(meminfo)
    total, available = info["MemTotal"], info.get("MemAvailable", info.get("MemFree", 0))
    limited = _cgroup_limit(cgroup)
    if limited is not None and limited[0] < total:
        total, available = limited[0], min(available, limited[0] - limited[1])
        return Limit(total, available, threshold, "this cgroup")
    return Limit(total, available, threshold, "this machine")


# -- the check ------------------------------------------------------------------------------------------
def check_disabled(env: Mapping[str, str] | None = None) -> bool:
    """``E2C_MEMORY_CHECK=0`` (or false/no/off) turns the check off."""
    return env_switch(CHECK_ENV, env) is False


def refusal(est: Estimate, limit: Limit, what: str, fix: str) -> str | None:
    """The one line that refuses ``what`` (a run's description) when ``est`` is over ``limit``, with
    ``fix`` (what to change, in the caller's words); None when it fits."""
    if est.total <= limit.bytes:
        return None
    free = max(limit.bytes, 0.0)
    kept = (
        f" less {1 - limit.threshold:.0%} of {limit.total / GIB:.1f} GiB kept below ray's memory monitor"
        if limit.threshold < 1.0
        else ""
    )
    return (
        f"{what} needs about {est.total / GIB:.1f} GiB of memory ({est.parts()}; e2c/rl/memory.py) but "
        f"{limit.source} can give a run {free / GIB:.1f} GiB ({limit.available / GIB:.1f} GiB free{kept}): {fix}"
    )


def fix_hint(est: Estimate, limit: Limit, changes: Sequence[str], skip: str) -> str:
    """What to change: ``changes`` (the caller's settings, in its words) when lowering the micro-batches or
    the samples can help, else that the run does not fit this machine at any such size; then ``skip``."""
    fixed = est.total - est.activations
    if fixed >= limit.bytes:
        return (
            f"the run without its micro-batches (ray, its workers, the model's weights and optimizer state, the "
            f"rollout server) takes about {fixed / GIB:.1f} GiB: free memory or use a larger machine, or {skip}"
        )
    return f"{', or '.join(changes)}; or {skip}"


def check_run(
    model: ModelShape,
    plan: RunPlan,
    what: str,
    changes: Sequence[str],
    skip: str = f"pass {NO_CHECK_HINT}",
    limit: Limit | None = None,
) -> Estimate:
    """Refuse (:class:`UserError`, one line) an RL run of ``model`` shaped as ``plan`` that cannot fit in
    this machine's memory (``limit``: :func:`machine_limit` by default); returns the estimate otherwise.
    ``what`` names the run; ``changes`` are what would make it smaller and ``skip`` how to start it anyway,
    in the caller's words."""
    limit = limit or machine_limit()
    est = estimate(model, plan)
    line = refusal(est, limit, what, fix_hint(est, limit, changes, skip))
    if line is not None:
        raise UserError(line)
    return est


def launcher_changes(plan: RunPlan, batch: int, n: int) -> list[str]:
    """What makes a launcher run smaller, as Hydra overrides: its micro-batch size, its samples per step.
    (Gradient checkpointing, which the estimate counts, is not offered: the CPU set-up turns it off and it
    has not been run there.)"""
    if plan.dynamic:
        micro = (
            f"lower actor_rollout_ref.actor.ppo_max_token_len_per_gpu (now {plan.train_budget} tokens per "
            "micro-batch)"
        )
    else:
        micro = (
            f"lower actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (now {plan.train_micro}; or set "
            "actor_rollout_ref.actor.use_dynamic_bsz=true with a token budget)"
        )
    return [micro, f"lower data.train_batch_size x actor_rollout_ref.rollout.n (now {batch} x {n})"]


def cpu_rollout() -> tuple[str, int]:
    """(engine, bytes per weight) of the CPU rollout this machine would run (``E2C_ROLLOUT_ENGINE``,
    ``E2C_ROLLOUT_DTYPE``); their values are checked by the launcher before this is asked."""
    try:
        engine, dtype = rollout_engine(), rollout_dtype()
    except ValueError as e:
        raise UserError(str(e)) from None
    return engine, dtype.itemsize


# -- the workers' allocator -----------------------------------------------------------------------------
MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"
MMAP_THRESHOLD = 1 << 20
"""Bytes from which glibc's malloc serves an allocation with its own mapping, given back when freed (the
fallback where jemalloc is not installed). By default glibc raises this threshold to the size of each mapped
block it frees (up to 32 MiB), so after the first step the update's activations (micro-batches of varying
length, 1-20 MiB per tensor for SmolLM2-135M) come from the heap, which fragments and is not given back."""

JEMALLOC = "libjemalloc.so.2"
JEMALLOC_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
)
"""Where distributions install jemalloc (Debian and Ubuntu: ``apt install libjemalloc2``)."""

RAY_JEMALLOC = ("core", "libjemalloc.so")
"""ray's wheel ships a jemalloc of its own (``ray/core/libjemalloc.so``, which ray preloads into its object
store): every install of the toolkit has it, no root or system package needed."""


def bundled_jemalloc() -> str | None:
    """The jemalloc inside the installed ray wheel, found without importing ray; None when absent."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("ray")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder).joinpath(*RAY_JEMALLOC)
        if path.is_file():
            return str(path)
    return None


def find_jemalloc(dirs: Sequence[str] = JEMALLOC_DIRS, bundled: bool = True) -> str | None:
    """The path of jemalloc's shared library: the distribution's in the first of ``dirs`` that has it, else
    (``bundled``) the copy in ray's wheel (:func:`bundled_jemalloc`); None when there is neither."""
    for d in dirs:
        path = Path(d) / JEMALLOC
        if path.is_file():
            return str(path)
    return bundled_jemalloc() if bundled else None


def worker_allocator_env(env: Mapping[str, str] | None = None, jemalloc: str | None = None) -> dict[str, str]:
    """Environment for the ray workers of a CPU run that keeps their memory from growing step by step and
    their time out of the kernel.

    Measured on 32 samples a step from the 60-step SFT model (2026-11-29, 2 cores; docs/training.md,
    "Memory on a CPU"): with glibc's defaults the actor-update worker grew from 6.3 to 8.9 GiB over 8 steps,
    and a run of that shape was killed by ray's monitor at step 13. glibc with its mmap threshold fixed at
    1 MiB held the actor at 3.2-7.3 GiB, but each freed block's pages came back as page faults: 30% of the
    CPU in the kernel and the update's time per token rising from 5.9 to 9.1 ms over 10 steps. jemalloc
    (``LD_PRELOAD``) held it at 3.1-6.4 GiB at 4.6-5.9 ms per token, about glibc's default speed.

    So: jemalloc (``jemalloc``, else :func:`find_jemalloc`: the distribution's, else ray's own copy) put
    first in the workers' ``LD_PRELOAD``; glibc's threshold at :data:`MMAP_THRESHOLD` only where neither
    exists. Yours win: a run whose ``LD_PRELOAD`` already names jemalloc or tcmalloc, or whose environment
    sets ``MALLOC_MMAP_THRESHOLD_``, gets nothing added (the workers inherit your environment)."""
    env = os.environ if env is None else env
    preload = env.get("LD_PRELOAD", "").strip()
    if "jemalloc" in preload or "tcmalloc" in preload or env.get(MMAP_THRESHOLD_ENV, "").strip():
        return {}
    jemalloc = jemalloc or find_jemalloc()
    if jemalloc:
        return {"LD_PRELOAD": f"{jemalloc}:{preload}" if preload else jemalloc}
    return {MMAP_THRESHOLD_ENV: str(MMAP_THRESHOLD)}


def allocator_line(env: Mapping[str, str] | None = None, jemalloc: str | None = None) -> str:
    """One line naming the allocator the workers of a CPU run get from :func:`worker_allocator_env`."""
    env = os.environ if env is None else env
    added = worker_allocator_env(env, jemalloc)
    if "LD_PRELOAD" in added:
        return f"workers' allocator: jemalloc ({added['LD_PRELOAD'].split(':')[0]})"
    if added:
        return (
            f"workers' allocator: glibc with {MMAP_THRESHOLD_ENV}={added[MMAP_THRESHOLD_ENV]} (no jemalloc found "
            "in the system's folders or ray's wheel: expect a third of the update's time in the kernel)"
        )
    mine = (
        env.get("LD_PRELOAD", "").strip() or f"{MMAP_THRESHOLD_ENV}={env.get(MMAP_THRESHOLD_ENV, '').strip()}"
    )
    return f"workers' allocator: yours ({mine})"


# -- the actor's freed pages between updates ----------------------------------------------------------
ARENAS_ALL = 4096
"""jemalloc's ``MALLCTL_ARENAS_ALL``: ``arena.4096.purge`` purges every arena."""


def _mallctl() -> Any:
    """jemalloc's ``mallctl`` when jemalloc is this process's allocator (preloaded), else None."""
    try:
        fn = ctypes.CDLL(None).mallctl
    except (AttributeError, OSError):
        return None
    fn.restype = ctypes.c_int
    return fn


def _set_decay(ctl: Any, name: bytes, ms: int) -> bool:
    value = ctypes.c_ssize_t(ms)
    return ctl(name, None, None, ctypes.byref(value), ctypes.c_size_t(ctypes.sizeof(value))) == 0


def hold_freed_pages(_actor: Any = None) -> bool:
    """In this process (an actor worker, through ray's ``__ray_call__``; the argument is that actor): jemalloc
    keeps the pages the update frees, for the next tensors of the update to reuse, until
    :func:`release_freed_pages`. Returns False, changing nothing, where jemalloc is not the allocator.

    Why: jemalloc gives freed pages back to the kernel over its decay time (10 s; at once for allocations
    over 8 MiB, which it serves from a dedicated arena), and the next micro-batch's logits and activations
    then fault them in again, zeroed by the kernel. Measured on the embedded model (2026-12-07, 2 cores,
    fp32, 3 updates of 4 packed micro-batches of ~1,330 tokens): jemalloc's defaults 82.7-89.3 s with 29.6-31.6 s
    of it in the kernel and 16 M page faults, peak RSS 6.2 GB; held within each update and purged after
    it, 74.0 s, 13.3 s in the kernel, 3.2 M faults, 7.2 GB; never purged, 76.6 s but 11.5 GB."""
    ctl = _mallctl()
    if ctl is None:
        return False
    narenas = ctypes.c_uint(0)
    size = ctypes.c_size_t(ctypes.sizeof(narenas))
    if ctl(b"arenas.narenas", ctypes.byref(narenas), ctypes.byref(size), None, ctypes.c_size_t(0)) != 0:
        return False
    ok = _set_decay(ctl, b"arenas.dirty_decay_ms", -1)  # arenas created later (new threads)
    for i in range(narenas.value):
        _set_decay(ctl, f"arena.{i}.dirty_decay_ms".encode(), -1)  # an arena not yet in use refuses: fine
    return ok


def release_freed_pages(_actor: Any = None) -> bool:
    """Give back every page jemalloc holds freed in this process (after an update, so the rollout that runs
    next has the memory); False where jemalloc is not the allocator."""
    ctl = _mallctl()
    if ctl is None:
        return False
    return ctl(f"arena.{ARENAS_ALL}.purge".encode(), None, None, None, ctypes.c_size_t(0)) == 0
