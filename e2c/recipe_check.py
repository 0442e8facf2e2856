"""Check the GPU recipe's training configs at a cluster size, and estimate each stage's time, without a GPU.

``python -m e2c.recipe_check --gpus 8 --nnodes 2`` (run first by ``scripts/gpu_recipe.sh``) composes, in-process,
the exact Hydra configuration of each training stage (SFT; RL stages 1 and 2, GRPO or DAPO) through the
launchers' own override builders, and runs on each the batch arithmetic verl asserts only inside its workers
(batches over data-parallel ranks, rollout and FSDP group sizes dividing the world, micro-batches, one sequence
in a dynamic micro-batch) and verl's own configuration checks. A failure is one
:class:`~e2c.core.errors.UserError` line naming the stage, the setting, the numbers and a value that works; no
worker, ray or GPU is started. The time estimates come from a FLOPs model, not a measurement.
More: docs/cluster-and-gpu.md, "Checks and expected times before renting GPUs".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import MODEL, TEXT, Number, ValueType, positive, probability, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, flag_field, from_flags
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.paths import configs_dir, project_root
from e2c.data.registry import get_spec, resolve_names
from e2c.launch.batch_shapes import (  # noqa: F401  (re-exported: the recipe check's public names)
    ALGO_NAMES,
    Cluster,
    RlShape,
    SftShape,
    cfg_int,
    cfg_value,
    check_rl,
    check_sft,
    divisors,
    longest_sequence,
    or_list,
    padded_samples,
    stage_label,
    world_fix,
)
from e2c.launch.checks import compose_checked, first_line, verl_rl_checks, verl_sft_checks
from e2c.launch.devices import MAX_NODES, gpu_count, requested_gpus
from e2c.rl.launch import build_overrides, config_name, default_output_dir, default_sft_model, parse_args
from e2c.rl.settings import e2c_settings
from e2c.sft.launch import CONFIG_NAME, Plan, hydra_overrides

# ------------------------------------------------------------------------------------------------ constants
# Peak dense bf16 tensor-core throughput of one H100 SXM (NVIDIA's datasheet, without sparsity).
H100_PEAK_FLOPS = 989e12
# Training (FSDP2, bf16, gradient checkpointing, packed sequences): dense training of 4-8B models on H100s
# typically reaches 30-45% MFU; 0.35 is mid-range. Log-prob passes are the same kernels without backward.
MFU_TRAIN = 0.35
# Decoding is memory-bound: each step reads all weights (16 GB for 8B in bf16) plus every sequence's KV
# cache (~0.15 MB per token of context for Qwen3-8B), at ~3.3 TB/s, to produce one token per sequence.
# With ~64 sequences of ~4k context per GPU that is ~15 ms per step, ~4k tokens/s, ~0.07 of the peak FLOPs;
# 0.05 leaves room for the long tail of a batch (the last, longest chains run at a small batch).
MFU_DECODE = 0.05
# Mean response length as a fraction of its maximum (E2C chains are long; many reach the cap).
LENGTH_FRACTION = 0.5
# DAPO's dynamic sampling regenerates for groups it drops (all right or all wrong), up to e2c's
# max_num_gen_batches (10) per step: assumed 2 generation batches per step on average.
DAPO_GEN_BATCHES = 2.0

# The paper's data (arXiv 2509.23946 release): SFT pairs and RL prompts; used when no local file is there.
PAPER_SFT_ROWS = 58_000
PAPER_RL_PROMPTS = 14_000
SFT_TRAIN_FILE = "data/processed/sft/e2c_sft_train.parquet"
RL_TRAIN_FILE = "data/processed/rl/e2c_rl_train.parquet"
# Parameters of the paper's models when no config.json is at hand (matched on the name, lower case).
PARAM_TABLE: dict[str, float] = {"qwen3-8b": 8.2e9, "qwen3-4b": 4.0e9, "explore-execute-chain-qwen": 8.2e9}

# Public sizes of the evaluation sets (problems), by e2c.data.registry name.
EVAL_SIZES: dict[str, int] = {
    "aime24": 30,
    "aime25": 30,
    "amc23": 40,
    "gsm8k": 1319,
    "math500": 500,
    "minerva": 272,
    "olympiadbench": 674,
    "math_algebra": 1187,
    "medqa": 1273,
    "medmcqa": 4183,
    "anatomy": 135,
    "clinical_knowledge": 265,
    "college_biology": 144,
    "college_medicine": 173,
    "medical_genetics": 100,
    "professional_medicine": 272,
}
EVAL_MAX_TOKENS = {"math": 8192, "med": 1500}  # the paper's budgets (the registry's defaults)
FILTER_MAX_TOKENS = 8192  # the RL configs' data.max_response_length, the pass-rate filter's default

STEPS = ("data", "sft", "filter", "rl1", "rl2", "eval", "tts")  # scripts/gpu_recipe.sh's order


# ------------------------------------------------------------------------------------------------ shapes
@dataclass(frozen=True)
class Assumptions:
    """The estimate's stated assumptions (docs/cluster-and-gpu.md gives the whole model)."""

    peak_flops: float = H100_PEAK_FLOPS
    mfu_train: float = MFU_TRAIN
    mfu_decode: float = MFU_DECODE
    length_fraction: float = LENGTH_FRACTION
    dapo_gen_batches: float = DAPO_GEN_BATCHES


# ------------------------------------------------------------------------------------------------ helpers
# ------------------------------------------------------------------------------------------------ compose
def sft_config(cluster: Cluster, model: str, overrides: Sequence[str] = (), steps: int | None = None) -> Any:
    """The composed ``configs/e2c_sft.yaml`` as :func:`e2c.sft.launch.hydra_overrides` writes it for a GPU
    plan of ``cluster`` (the launcher's placeholder data path; nothing is read)."""
    # Plan's fields as the launcher's make_plan fills them for GPUs (``ranks``: processes per node, where
    # this version of the launcher has it).
    fields = {f.name for f in dataclasses.fields(Plan)}
    extra = {"ranks": cluster.gpus_per_node} if "ranks" in fields else {}
    plan = Plan(
        mode="sft",
        model=model,
        model_note=model,
        train=[str(project_root() / SFT_TRAIN_FILE)],
        val=[],
        output_dir=project_root() / "models" / "checkpoints" / "sft",
        gpus=cluster.gpus_per_node,
        nnodes=cluster.nnodes,
        node_rank=0,
        **extra,
    )
    # The launcher's overrides first, the user's after them (hydra_overrides appends plan.overrides last).
    return compose_checked(configs_dir(), CONFIG_NAME, hydra_overrides(plan, steps), list(overrides))


def rl_config(
    algo: str, stage: int, cluster: Cluster, overrides: Sequence[str] = (), steps: int | None = None
) -> Any:
    """The composed ``configs/e2c_<algo>.yaml`` with ``e2c_stage=stage<stage>`` and the overrides
    :func:`e2c.rl.launch.build_overrides` gives a launch on ``cluster`` (its flags parsed by the launcher's own
    :func:`~e2c.rl.launch.parse_args`)."""
    argv = ["--algo", algo, "--stage", str(stage), "--nnodes", str(cluster.nnodes)]
    if steps is not None:
        argv += ["--steps", str(steps)]
    args = parse_args([*argv, *overrides])
    args.model_path = str(default_sft_model())  # stage 2: stage 1's checkpoint, the same architecture
    args.output_dir = default_output_dir(algo, stage)
    fixed = [f"e2c_stage=stage{stage}", *build_overrides(args, cluster.gpus_per_node)]
    return compose_checked(configs_dir(), config_name(algo), fixed, args.overrides)


# ------------------------------------------------------------------------------------------------ checks
# ------------------------------------------------------------------------------------------------ estimate
def params_from_hf_config(config: dict[str, Any]) -> float | None:
    """Parameters of a dense decoder from its HF ``config.json`` (embeddings, attention, gated MLP, norms);
    None for a mixture of experts (its active parameters are not in the file's plain keys).

    >>> qwen3_8b = dict(hidden_size=4096, num_hidden_layers=36, num_attention_heads=32,
    ...     num_key_value_heads=8, head_dim=128, intermediate_size=12288, vocab_size=151936)
    >>> round(params_from_hf_config(qwen3_8b) / 1e9, 2)
    8.19
    """
    if any(k in config for k in ("num_experts", "num_local_experts", "n_routed_experts")):
        return None
    try:
        d = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or d // heads)
        ffn = int(config["intermediate_size"])
        vocab = int(config["vocab_size"])
    except (KeyError, TypeError, ValueError):
        return None
    attention = 2 * d * heads * head_dim + 2 * d * kv * head_dim
    per_layer = attention + 3 * d * ffn + 2 * d
    embeddings = vocab * d * (1 if config.get("tie_word_embeddings") else 2)
    return float(layers * per_layer + embeddings + d)


def model_params(model: str) -> tuple[float | None, str]:
    """``(parameters, where the number comes from)``: a local folder's config.json, else :data:`PARAM_TABLE`
    matched on the name; None when neither knows the model."""
    config = Path(model).expanduser() / "config.json"
    if config.is_file():
        try:
            n = params_from_hf_config(json.loads(config.read_text()))
        except (OSError, json.JSONDecodeError):
            n = None
        if n:
            return n, f"{config}"
    name = model.lower().rstrip("/")
    for key, n in PARAM_TABLE.items():
        if key in name:
            return n, "the paper's table"
    return None, f"unknown for {model} (pass --params)"


def sft_step_seconds(params: float, shape: SftShape, world: int, a: Assumptions) -> float:
    """``6 N B (f L) / (G P U_train)``: one SFT optimizer step."""
    tokens = shape.batch * a.length_fraction * shape.max_length
    return 6 * params * tokens / (world * a.peak_flops * a.mfu_train)


def rl_step_seconds(
    params: float, shape: RlShape, world: int, a: Assumptions, gen_batches: float = 1.0
) -> dict[str, float]:
    """One RL step's phases (docs/cluster-and-gpu.md): ``generation``, ``log-probs``, ``training``."""
    samples = shape.batch * shape.n
    response = a.length_fraction * shape.response_length
    tokens = samples * (shape.prompt_length + response)
    train = world * a.peak_flops * a.mfu_train
    passes = 1 + (1 if shape.reference else 0)
    return {
        "generation": 2 * params * gen_batches * samples * response / (world * a.peak_flops * a.mfu_decode),
        "log-probs": 2 * params * passes * tokens / train,
        "training": 6 * params * shape.ppo_epochs * tokens / train,
    }


def total_steps(rows: int, batch: int, epochs: int, fixed: int | None) -> int:
    """``fixed`` (trainer.total_training_steps) when set, else ``floor(rows / batch) x epochs`` (verl's
    dataloaders drop the last partial batch)."""
    return fixed if fixed is not None else (rows // batch) * epochs


def decode_seconds(params: float, tokens: float, gpus: int, a: Assumptions) -> float:
    """``2 N tokens / (G P U_decode)``: generating ``tokens`` on ``gpus`` GPUs."""
    return 2 * params * tokens / (gpus * a.peak_flops * a.mfu_decode)


def duration(seconds: float) -> str:
    """A short human duration.

    >>> duration(11.64), duration(700), duration(2 * 3600 + 1800)
    ('11.6 s', '11.7 min', '2.5 h')
    """
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def file_rows(path: str | Path) -> int | None:
    """Rows of a local parquet file from its footer (nothing else is read); None when there is none."""
    p = Path(path)
    if not p.is_absolute():
        p = project_root() / p
    if not p.is_file():
        return None
    try:
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(p).metadata.num_rows)
    except Exception:
        return None


def eval_tokens(
    datasets: str, samples: int, fraction: float, max_tokens: int | None
) -> tuple[float | None, str]:
    """Generated tokens of an evaluation: ``problems x samples x f x max_new_tokens`` per set."""
    try:
        names = resolve_names(datasets)
    except Exception as e:  # a bad name is the eval entry point's to report
        return None, f"unknown datasets {datasets!r} ({first_line(e)})"
    missing = [n for n in names if n not in EVAL_SIZES]
    if missing:
        return None, f"no size known for {', '.join(missing)}"
    total = 0.0
    problems = 0
    for name in names:
        spec = get_spec(name)
        budget = max_tokens or spec.max_new_tokens or EVAL_MAX_TOKENS.get(spec.group, 8192)
        total += EVAL_SIZES[name] * samples * fraction * budget
        problems += EVAL_SIZES[name]
    return total, f"{problems:,} problems x {samples} samples"


# ------------------------------------------------------------------------------------------------ run
@dataclass
class Options:
    """What :func:`run` checks and estimates (the recipe's knobs)."""

    cluster: Cluster
    algo: str = "grpo"
    model: str = "Qwen/Qwen3-8B"
    start: str = "data"
    sft_steps: int | None = None
    rl1_steps: int | None = None
    rl2_steps: int | None = None
    sft_rows: int | None = None
    rl_prompts: int | None = None
    rl_train_data: str = RL_TRAIN_FILE
    filter_k: int = 0
    eval_datasets: str = "all"
    eval_samples: int = 8
    eval_max_tokens: int | None = None
    params: float | None = None
    sft_overrides: tuple[str, ...] = ()
    rl_overrides: tuple[str, ...] = ()
    verl: bool = True
    assumptions: Assumptions = dataclasses.field(default_factory=Assumptions)


def run(opts: Options) -> Iterator[tuple[str, str, float | None]]:
    """Check and estimate the recipe's steps from ``opts.start`` on, in order; yields ``(step, line,
    estimated seconds or None)``. Raises UserError (one line) at the first stage that cannot run."""
    c, a = opts.cluster, opts.assumptions
    if c.gpus_per_node < 1 or c.nnodes < 1:
        raise UserError(f"the cluster needs at least 1 node and 1 GPU per node, got {c}")
    params = opts.params or model_params(opts.model)[0]
    todo = STEPS[STEPS.index(opts.start) :]
    for step in todo:
        if step == "data":
            yield step, "time unknown (download-bound: depends on the network to the Hugging Face hub)", None
        elif step == "sft":
            yield _sft_step(opts, params, a)
        elif step == "filter":
            if opts.filter_k > 0:
                yield _filter_step(opts, params, a)
        elif step in ("rl1", "rl2"):
            yield _rl_step(opts, int(step[-1]), params, a)
        elif step == "eval":
            yield _eval_step(opts, params, a)
        else:
            yield (
                step,
                "time unknown (TTS tokens depend on where each method stops; the paper measured them only at "
                "K=32: self-consistency 86.2k, E2C-ReAct 12.4k tokens per problem); the run prints an ETA per "
                "problem",
                None,
            )


def _unknown_params(opts: Options) -> str:
    return f"no estimate: the parameter count of {opts.model} is unknown (pass --params)"


def _sft_step(opts: Options, params: float | None, a: Assumptions) -> tuple[str, str, float | None]:
    c = opts.cluster
    label = stage_label("sft", opts.algo, c)
    cfg = sft_config(c, opts.model, opts.sft_overrides, opts.sft_steps)
    shape = check_sft(cfg, label, c)
    if opts.verl:
        verl_sft_checks(cfg, label)
    rows = opts.sft_rows or file_rows(SFT_TRAIN_FILE) or PAPER_SFT_ROWS
    facts = (
        f"ok: {shape.batch} rows a step over {shape.dp} data-parallel ranks ({shape.batch // shape.dp} each)"
    )
    if params is None:
        return "sft", f"{facts}; {_unknown_params(opts)}", None
    steps = total_steps(rows, shape.batch, shape.epochs, shape.total_steps)
    per = sft_step_seconds(params, shape, c.world, a)
    est = steps * per
    return (
        "sft",
        f"{facts}; estimate ~{duration(est)} = {steps:,} steps x {duration(per)} ({rows:,} rows)",
        est,
    )


def _rl_step(
    opts: Options, stage: int, params: float | None, a: Assumptions
) -> tuple[str, str, float | None]:
    c = opts.cluster
    key = f"rl{stage}"
    label = stage_label(key, opts.algo, c)
    steps_flag = opts.rl1_steps if stage == 1 else opts.rl2_steps
    cfg = rl_config(opts.algo, stage, c, opts.rl_overrides, steps_flag)
    shape = check_rl(cfg, label, c)
    if opts.verl:
        verl_rl_checks(cfg, label)
        try:
            e2c_settings(cfg)
        except UserError as e:
            raise UserError(f"{label}: {e}") from None
    samples = shape.batch * shape.n
    facts = (
        f"ok: {shape.batch} prompts x n={shape.n} = {samples:,} samples a step over {shape.dp} ranks, "
        f"vLLM tp={cfg.actor_rollout_ref.rollout.tensor_model_parallel_size}"
    )
    if shape.padded != samples:
        facts += f" (verl pads them to {shape.padded:,} with no-op samples)"
    if params is None:
        return key, f"{facts}; {_unknown_params(opts)}", None
    rows = opts.rl_prompts or file_rows(opts.rl_train_data) or PAPER_RL_PROMPTS
    steps = total_steps(rows, shape.batch, shape.epochs, shape.total_steps)
    gen = a.dapo_gen_batches if opts.algo == "dapo" else 1.0
    phases = rl_step_seconds(params, shape, c.world, a, gen)
    per = sum(phases.values())
    est = steps * per
    parts = " + ".join(f"{k} {duration(v)}" for k, v in phases.items())
    return key, f"{facts}; estimate ~{duration(est)} = {steps:,} steps x {duration(per)} ({parts})", est


def _eval_step(opts: Options, params: float | None, a: Assumptions) -> tuple[str, str, float | None]:
    tokens, what = eval_tokens(opts.eval_datasets, opts.eval_samples, a.length_fraction, opts.eval_max_tokens)
    if tokens is None:
        return "eval", f"time unknown ({what})", None
    if params is None:
        return "eval", _unknown_params(opts), None
    est = decode_seconds(params, tokens, opts.cluster.gpus_per_node, a)
    return (
        "eval",
        f"estimate ~{duration(est)} ({what}, {tokens / 1e6:.0f}M generated tokens on one node)",
        est,
    )


def _filter_step(opts: Options, params: float | None, a: Assumptions) -> tuple[str, str, float | None]:
    if params is None:
        return "filter", _unknown_params(opts), None
    prompts = opts.rl_prompts or file_rows(opts.rl_train_data) or PAPER_RL_PROMPTS
    tokens = prompts * opts.filter_k * a.length_fraction * FILTER_MAX_TOKENS
    est = decode_seconds(params, tokens, opts.cluster.gpus_per_node, a)
    return "filter", f"estimate ~{duration(est)} ({prompts:,} prompts x k={opts.filter_k}, one node)", est


# ------------------------------------------------------------------------------------------------ CLI
GPU_COUNT = whole(1, 1024)


@dataclass(frozen=True, repr=False)
class GpusOrAuto(ValueType):
    """``--gpus``: GPUs per node, or ``auto`` (the ones a launcher would use)."""

    count: Number = GPU_COUNT

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.count.name} or 'auto'"

    def parse(self, text: str) -> int | str:
        return "auto" if str(text).strip() == "auto" else int(self.count.parse(text))


@dataclass(frozen=True)
class RecipeFlags:
    """The command line: each field is one flag (``python -m e2c.recipe_check --help``); :func:`options`
    makes the :class:`Options` that :func:`run` checks from them."""

    gpus: int | str = flag_field(
        "8", "GPUs per node, or 'auto' for the visible ones (scripts: N_GPUS; default 8)", GpusOrAuto()
    )
    nnodes: int = flag_field(1, "nodes (NNODES; default 1)", whole(1, MAX_NODES))
    algo: str = flag_field("grpo", "RL algorithm (RL_ALGO; default grpo)", choices=sorted(ALGO_NAMES))
    model: str = flag_field("Qwen/Qwen3-8B", "base model, for the parameter count (BASE_MODEL)", MODEL)
    params: float | None = flag_field(None, "parameter count, e.g. 8.2e9 (default: from --model)", positive())
    start: str = flag_field("data", "first recipe step (FROM; default data)", flag="--from", choices=STEPS)
    sft_steps: int | None = flag_field(None, "SFT optimizer steps (SFT_STEPS; default: epochs)", whole(1))
    rl1_steps: int | None = flag_field(None, "RL stage 1 steps (RL1_STEPS; default: epochs)", whole(1))
    rl2_steps: int | None = flag_field(None, "RL stage 2 steps (RL2_STEPS; default: epochs)", whole(1))
    sft_rows: int | None = flag_field(None, f"SFT rows (default: {SFT_TRAIN_FILE}'s, else 58k)", whole(1))
    rl_prompts: int | None = flag_field(None, "RL prompts (default: --rl-train-data's, else 14k)", whole(1))
    # may not exist yet (the recipe's data step writes it): then the paper's count is used
    rl_train_data: str = flag_field(
        RL_TRAIN_FILE, f"RL training parquet, for its rows (default {RL_TRAIN_FILE})", TEXT
    )
    filter_k: int = flag_field(
        0, "pass-rate filter samples per prompt; 0: no filter step (default)", whole(0)
    )
    eval_datasets: str = flag_field("all", "EVAL_DATASETS (default all: the 8 math sets)", TEXT)
    eval_samples: int = flag_field(8, "EVAL_SAMPLES (default 8)", whole(1))
    eval_max_tokens: int | None = flag_field(None, "EVAL_MAX_TOKENS (default: each set's)", whole(1))
    length_fraction: float = flag_field(
        LENGTH_FRACTION, f"mean length / max (default {LENGTH_FRACTION})", probability(open_zero=True)
    )
    mfu_train: float = flag_field(
        MFU_TRAIN, f"assumed training MFU (default {MFU_TRAIN})", probability(open_zero=True)
    )
    mfu_decode: float = flag_field(
        MFU_DECODE, f"assumed decoding MFU (default {MFU_DECODE})", probability(open_zero=True)
    )
    peak_tflops: float = flag_field(
        H100_PEAK_FLOPS / 1e12, "GPU bf16 dense peak (default 989, H100)", positive()
    )
    dapo_gen_batches: float = flag_field(
        DAPO_GEN_BATCHES, "DAPO generation batches a step (default 2)", positive()
    )
    sft_override: tuple[str, ...] = flag_field(
        (), "Hydra override for the SFT config (repeatable)", TEXT, repeat=True
    )
    rl_override: tuple[str, ...] = flag_field(
        (), "Hydra override for both RL stages (repeatable)", TEXT, repeat=True
    )


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="python -m e2c.recipe_check",
        description="Check the GPU recipe's training configs at a cluster size (verl's checks and its run-time "
        "batch arithmetic, no GPU needed) and estimate each step's time from a FLOPs model.",
    )
    add_setting_flags(p, RecipeFlags)
    return p


def resolve_gpus(value: str | int) -> int:
    """``--gpus``: a count, or ``auto``: the GPUs a launcher would use (:mod:`e2c.launch.devices`; 0 with none)."""
    if value == "auto":
        n = gpu_count()
        return requested_gpus(n) if n else 0
    try:
        n = int(value)
    except ValueError:
        raise UserError(
            f"--gpus (N_GPUS) must be a whole number of GPUs per node or 'auto', got {value!r}"
        ) from None
    if n < 1:
        raise UserError(f"--gpus (N_GPUS) must be at least 1, got {n}")
    return n


def options(args: RecipeFlags, gpus: int) -> Options:
    """The parsed flags as :class:`Options`."""
    return Options(
        cluster=Cluster(gpus, args.nnodes),
        algo=args.algo,
        model=args.model,
        start=args.start,
        sft_steps=args.sft_steps,
        rl1_steps=args.rl1_steps,
        rl2_steps=args.rl2_steps,
        sft_rows=args.sft_rows,
        rl_prompts=args.rl_prompts,
        rl_train_data=args.rl_train_data,
        filter_k=max(args.filter_k, 0),
        eval_datasets=args.eval_datasets,
        eval_samples=args.eval_samples,
        eval_max_tokens=args.eval_max_tokens,
        params=args.params,
        sft_overrides=tuple(args.sft_override),
        rl_overrides=tuple(args.rl_override),
        assumptions=Assumptions(
            peak_flops=args.peak_tflops * 1e12,
            mfu_train=args.mfu_train,
            mfu_decode=args.mfu_decode,
            length_fraction=args.length_fraction,
            dapo_gen_batches=args.dapo_gen_batches,
        ),
    )


def main(argv: list[str] | None = None) -> int:
    """Print one line per recipe step (``ok`` and the estimate), or one ``error:`` line and exit 2.

    The flags are checked before ``checks_done()``; the recipe's configs are this command's work (with
    ``E2C_CHECK_ONLY=1`` it stops before composing them)."""
    args = from_flags(build_parser().parse_args(argv), RecipeFlags)
    gpus = resolve_gpus(args.gpus)
    checks_done()
    if gpus == 0:
        print("[recipe-check] no GPU visible: the steps run their CPU set-up; nothing to check")
        return 0
    opts = options(args, gpus)
    params, source = (opts.params, "--params") if opts.params else model_params(opts.model)
    shown = f"{params:.3g} parameters ({source})" if params else source
    a = opts.assumptions
    print(
        f"[recipe-check] {opts.cluster} = {opts.cluster.world} GPUs, {opts.algo}, {opts.model}: {shown}",
        flush=True,
    )
    total = 0.0
    for step, line, seconds in run(opts):
        print(f"[recipe-check] {step}: {line}", flush=True)
        total += seconds or 0.0
    if total:
        print(
            f"[recipe-check] estimated total ~{duration(total)}: an ESTIMATE from a FLOPs model (6N/2N FLOPs per "
            f"token, MFU {a.mfu_train} training / {a.mfu_decode} decoding, {a.peak_flops / 1e12:.0f} TFLOP/s per "
            f"GPU, lengths at {a.length_fraction} of their maximum; see e2c/recipe_check.py), not a measurement",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    run_main(main)
