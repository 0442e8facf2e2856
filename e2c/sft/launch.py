"""Launching verl's SFT trainer for E2C: the run's plan (data, devices, model, folders), the Hydra overrides
and the ``torchrun`` command, and the run itself with its output echoed and saved."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from e2c.commandline.argtypes import EXISTING_DIR, MODEL, OUTPUT_DIR, TEXT, Choice, whole
from e2c.commandline.flags import flag_fields, setting
from e2c.core.errors import UserError
from e2c.core.files import RecordFile, check_output_dir, ensure_output_dir
from e2c.core.paths import configs_dir, project_root
from e2c.core.run_folder import identity_diff
from e2c.launch.batch_shapes import Cluster, check_sft
from e2c.launch.checkpoints import STEPS_KEY, keep_metrics, restore_metrics
from e2c.launch.checks import (
    DATA_FILES,
    DATA_FILES_OR_NONE,
    check_data_file,
    compose_checked,
    hydra_list,
    hydra_value,
    not_released,
    verl_sft_checks,
)
from e2c.launch.devices import (
    MAX_CPU_RANKS,
    MAX_NODES,
    cpu_note,
    cpu_ranks,
    cpu_train_dtype,
    env_count,
    gpu_count,
    requested_gpus,
)
from e2c.launch.presets import cpu_preset, preset_path
from e2c.launch.tracking import DEFAULT_LOGGERS, LOGGER_HELP, logger_override
from e2c.sft.export import META
from e2c.sft.metrics import METRICS, PATH_ENV, MetricsTail, watch
from e2c.sft.tagging import TaggedModel, plan_tagged_model

CONFIG_NAME = "e2c_sft"
GPU_MODEL = "Qwen/Qwen3-8B"
CPU_MODEL = "embedded"
# verl's SFT dataset reads parquet only (verl.utils.dataset.multiturn_sft_dataset).
DATA_SUFFIXES = (".parquet",)
MODES = {
    # mode: (default train file candidates, default val candidates, dataset class, schema, output folder)
    "sft": (
        ("data/processed/sft/e2c_sft_train.parquet", "data/processed/sft/synthetic_sft.parquet"),
        ("data/processed/sft/e2c_sft_val.parquet",),
        "E2CSFTDataset",
        "sft",
        "models/checkpoints/sft",
    ),
    "ef-sft": (
        ("data/processed/ef_sft/ef_sft.parquet",),
        (),
        "EFSFTDataset",
        "ef_sft",
        "models/checkpoints/ef_sft",
    ),
}
# With no GPU, configs/cpu/sft.yaml's overrides (its trainer.total_training_steps is the default --steps).
CPU_PRESET = "sft"  # configs/cpu/sft.yaml


# ------------------------------------------------------------------------------------------------ settings
@dataclass(frozen=True)
class SFTSettings:
    """The launcher's settings; each field is the flag its metadata names (``python -m e2c.sft.run --help``),
    declared here once: help line, value type and default. The parser checks each value; the plan trusts them."""

    mode: str = field(
        default="sft",
        metadata=setting(
            "sft: full E2C chains; ef-sft: exploration-only rows (default: sft)",
            flag="--mode",
            value=Choice(tuple(sorted(MODES)), "mode"),
        ),
    )
    model: str | None = field(
        default=None,
        metadata=setting(
            f"base model: HF id, folder, 'embedded' or 'tiny' (default: {GPU_MODEL} with GPUs, {CPU_MODEL} on CPU)",
            flag="--model",
            value=MODEL,
        ),
    )
    subfolder: str | None = field(
        default=None,
        metadata=setting(
            "subfolder of the model (e.g. 8B for the released checkpoint; default: none)",
            flag="--subfolder",
            value=TEXT,
        ),
    )
    train_data: str | None = field(
        default=None,
        metadata=setting(
            "training parquet, comma-separated for several (default: the mode's processed file)",
            flag="--train-data",
            value=DATA_FILES,
        ),
    )
    val_data: str | None = field(
        default=None,
        metadata=setting(
            "validation parquet(s); 'none' for no validation (default: the paper's split when present)",
            flag="--val-data",
            value=DATA_FILES_OR_NONE,
        ),
    )
    output_dir: str | None = field(
        default=None,
        metadata=setting(
            "run folder: verl checkpoints in verl/, the HF model in final/ (default: models/checkpoints/<mode>)",
            flag="--output-dir",
            value=OUTPUT_DIR,
        ),
    )
    steps: int | None = field(
        default=None,
        metadata=setting(
            f"optimizer steps (default: all epochs with GPUs; on CPU, {STEPS_KEY} of configs/cpu/sft.yaml)",
            flag="--steps",
            value=whole(1),
        ),
    )
    gpus: int | None = field(
        default=None,
        metadata=setting(
            "GPUs per node (default: counted from CUDA_VISIBLE_DEVICES, else torch; 0 = CPU)",
            flag="--gpus",
            value=whole(0, 1024),
        ),
    )
    ranks: int | None = field(
        default=None,
        metadata=setting(
            "with no GPU: CPU processes (FSDP ranks on gloo) per node, the GPU run's shape on a CPU "
            "(default: $N_GPUS, else 1)",
            flag="--ranks",
            value=whole(1, MAX_CPU_RANKS),
        ),
    )
    nnodes: int = field(
        default=1,
        metadata=setting(
            "nodes; above 1 set MASTER_ADDR, MASTER_PORT and NODE_RANK on each node (default: 1)",
            flag="--nnodes",
            value=whole(1, MAX_NODES),
        ),
    )
    node_rank: int | None = field(
        default=None,
        metadata=setting("this node's rank (default: $NODE_RANK or 0)", flag="--node-rank", value=whole(0)),
    )
    tagged_dir: str | None = field(
        default=None,
        metadata=setting(
            "where a base model without E2C tags gets its tagged copy (default: models/base/<name>-e2c)",
            flag="--tagged-dir",
            value=OUTPUT_DIR,
        ),
    )
    config_dir: str | None = field(
        default=None,
        metadata=setting(
            f"folder of {CONFIG_NAME}.yaml (default: configs/ of the project)",
            flag="--config-dir",
            value=EXISTING_DIR,
        ),
    )
    logger: str = field(default=DEFAULT_LOGGERS, metadata=setting(LOGGER_HELP, flag="--logger", value=TEXT))

    @classmethod
    def from_flags(cls, args: argparse.Namespace) -> SFTSettings:
        return cls(**flag_fields(args, cls))


# ------------------------------------------------------------------------------------------------ plan
@dataclass
class Plan:
    """Everything one run needs, resolved before anything is launched."""

    mode: str
    model: str
    model_note: str
    train: list[str]
    val: list[str]
    output_dir: Path
    gpus: int
    nnodes: int
    node_rank: int
    overrides: list[str] = field(default_factory=list)
    # Processes per node: the GPUs, or on a machine without one the CPU ranks (N_GPUS, --ranks).
    ranks: int = 1
    # The tagged copy the run starts from, made by prepare() once every check passed (None: none needed).
    tagging: TaggedModel | None = None

    @property
    def ckpt_dir(self) -> Path:
        return self.output_dir / "verl"

    @property
    def final_dir(self) -> Path:
        return self.output_dir / "final"

    @property
    def stats_path(self) -> Path:
        return self.output_dir / "sft_data_stats.json"


# The dtype verl's FSDP engine computes in (master weights and AdamW states stay fp32): e2c.launch.devices.cpu_train_dtype.
TRAIN_DTYPE_KEY = "++engine.mixed_precision.param_dtype"


def cpu_overrides() -> dict[str, str]:
    """``configs/cpu/sft.yaml``'s overrides (``preset``, then ``fixed``), then the CPU's compute dtype."""
    return {**cpu_preset(CPU_PRESET), TRAIN_DTYPE_KEY: cpu_train_dtype()}


def _existing(paths: list[str], what: str) -> list[str]:
    out = []
    for p in paths:
        path = Path(p).expanduser()
        if not path.is_absolute():
            path = (Path.cwd() / path) if (Path.cwd() / path).exists() else project_root() / path
        if not path.is_file():
            raise UserError(f"{what} file not found: {p}{not_released(path)}")
        out.append(str(path.resolve()))
    return out


def _default_file(candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if (project_root() / c).is_file()), None)


def node_rank(args: SFTSettings) -> int:
    """--node-rank, else $NODE_RANK, else 0; within the nodes."""
    rank = args.node_rank
    if rank is None:
        rank = env_count("NODE_RANK", whole(0), 0)
    if rank >= args.nnodes:
        raise UserError(f"--node-rank (NODE_RANK) must be in 0..{args.nnodes - 1}, got {rank}")
    return rank


def make_plan(args: SFTSettings, overrides: list[str]) -> Plan:
    """Resolve data, devices and the model; every problem is one UserError line. Writes nothing: the run
    folder and the model's tagged copy are made by :func:`prepare`, after every check."""
    train_default, val_default, _cls, schema, out_default = MODES[args.mode]
    gpus = gpu_count() if args.gpus is None else args.gpus
    if args.gpus is None and gpus:
        gpus = requested_gpus(gpus)  # the paper's N_GPUS, at most the visible ones
    elif args.gpus is None and (note := cpu_note("configs/cpu/sft.yaml")):
        print(f"[e2c-sft] {note}", flush=True)
    ranks = gpus or cpu_ranks(given=args.ranks)  # --ranks, else the paper's N_GPUS, else 1
    rank = node_rank(args)
    train_arg = args.train_data or _default_file(train_default)
    if not train_arg:
        raise UserError(
            f"no training data: none of {', '.join(train_default)} exists; run "
            "`bash scripts/prepare_all_data.sh --skip-download` or pass --train-data"
        )
    names = [t.strip() for t in train_arg.split(",") if t.strip()]
    if not names:
        raise UserError(f"--train-data (TRAIN_DATA) {train_arg!r} names no file")
    train = _existing(names, "training data")
    if args.val_data and args.val_data.lower() != "none":
        names = [v.strip() for v in args.val_data.split(",") if v.strip()]
        if not names:
            raise UserError(
                f"--val-data (VAL_DATA) {args.val_data!r} names no file; 'none' for no validation"
            )
        val = _existing(names, "validation data")
    elif args.val_data is None and args.train_data is None and _default_file(val_default):
        val = _existing([_default_file(val_default)], "validation data")  # type: ignore[list-item]
    else:
        val = []

    for f in train:
        check_data_file(f, "training data", schema, DATA_SUFFIXES, "--train-data (TRAIN_DATA)")
    for f in val:
        check_data_file(f, "validation data", schema, DATA_SUFFIXES, "--val-data (VAL_DATA)")
    # The user's overrides, composed as the trainer will, before the model is tagged (which writes a copy).
    cfg = compose_checked(
        Path(args.config_dir) if args.config_dir else configs_dir(),
        CONFIG_NAME,
        [f"trainer.n_gpus_per_node={ranks}", f"trainer.nnodes={args.nnodes}"]
        + ([f"{k}={v}" for k, v in cpu_overrides().items()] if gpus == 0 else []),
        overrides,
    )

    # verl's batch arithmetic at this run's ranks and nodes (the GPU recipe's own check): one line now, not
    # a silently smaller batch or an assertion inside a rank.
    cluster = Cluster(ranks, args.nnodes)
    label = f"{args.mode.upper()} at {cluster}" + ("" if gpus else " (CPU ranks)")
    check_sft(cfg, label, cluster)
    verl_sft_checks(cfg, label)  # the dataclasses verl's SFT trainer builds, inside its ranks
    out = Path(args.output_dir or project_root() / out_default).expanduser().resolve()
    check_output_dir(out, "output folder")
    tagging = plan_tagged_model(
        args.model or (GPU_MODEL if gpus else CPU_MODEL), args.tagged_dir, args.subfolder
    )
    plan = Plan(
        args.mode, tagging.path, tagging.note, train, val, out, gpus, args.nnodes, rank, overrides, ranks
    )
    plan.tagging = tagging
    return plan


def prepare(plan: Plan) -> None:
    """After the checks: the run folder, and the model's tagged copy when one is planned."""
    ensure_output_dir(plan.output_dir, "output folder")
    if plan.tagging is not None:
        plan.tagging.make()


def finished(plan: Plan, total_steps: int | None) -> bool:
    """Whether ``<output-dir>/final`` already holds the result of this very run (same mode, model, data,
    steps and overrides): a re-run then stops at once."""
    meta = plan.final_dir / META
    if not meta.is_file():
        return False
    try:
        done = json.loads(meta.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    same = {
        "mode": plan.mode,
        "base_model": plan.model,
        "train_files": plan.train,
        "val_files": plan.val,
        "total_steps_requested": total_steps,
        "overrides": plan.overrides,
    }
    return not identity_diff({k: done.get(k) for k in same}, same)


# ------------------------------------------------------------------------------------------------ CPU preset
def cpu_default_steps() -> int | None:
    """Optimizer steps of a CPU run without --steps: the preset's, else None (all epochs)."""
    steps = cpu_preset(CPU_PRESET).get(STEPS_KEY)
    try:
        return None if steps in (None, "null") else int(steps)
    except ValueError:
        raise UserError(
            f"{preset_path(CPU_PRESET)}: {STEPS_KEY} must be a whole number, got {steps!r}"
        ) from None


# ------------------------------------------------------------------------------------------------ command


def hydra_overrides(plan: Plan, total_steps: int | None, trackers: list[str] | None = None) -> list[str]:
    """The Hydra overrides for verl's SFT trainer (``trackers``: ``trainer.logger``, see
    :mod:`e2c.launch.tracking`; None keeps the config's); the user's own come last and win."""
    cls = MODES[plan.mode][2]
    # Paths go in quotes where Hydra would not read them plainly (a space, an accented letter).
    ov = [
        f"model.path={hydra_value(plan.model)}",
        f"data.train_files={hydra_list(plan.train)}",
        f"data.val_files={hydra_list(plan.val) if plan.val else 'null'}",
        f"data.custom_cls.name={cls}",
        f"data.stats_path={hydra_value(str(plan.stats_path))}",
        f"trainer.default_local_dir={hydra_value(str(plan.ckpt_dir))}",
        f"trainer.experiment_name={plan.mode}",
        f"trainer.nnodes={plan.nnodes}",
        f"trainer.n_gpus_per_node={plan.ranks}",
        # Hydra's own files (the composed config, its log) stay with the run, not in the repository's outputs/.
        f"hydra.run.dir={hydra_value(str(plan.output_dir / 'hydra'), '/${now:%Y-%m-%d_%H-%M-%S}')}",
    ]
    if trackers:
        ov.append(f"trainer.logger={logger_override(trackers)}")
    if total_steps is not None:
        ov.append(f"{STEPS_KEY}={total_steps}")
    if plan.gpus == 0:
        ov.extend(f"{k}={v}" for k, v in cpu_overrides().items() if k != STEPS_KEY)
    return ov + plan.overrides


def launch_command(plan: Plan, overrides: list[str], config_dir: Path) -> list[str]:
    """``torchrun ... -m verl.trainer.sft_trainer --config-path ... --config-name e2c_sft <overrides>``."""
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    if plan.nnodes > 1:
        addr = os.environ.get("MASTER_ADDR")
        if not addr:
            raise UserError("NNODES > 1 needs MASTER_ADDR (and NODE_RANK, MASTER_PORT) on every node")
        torchrun += [
            f"--nnodes={plan.nnodes}",
            f"--node_rank={plan.node_rank}",
            f"--master_addr={addr}",
            f"--master_port={os.environ.get('MASTER_PORT', '29500')}",
        ]
    else:
        torchrun += ["--standalone", "--nnodes=1"]
    torchrun.append(f"--nproc_per_node={plan.ranks}")
    return [
        *torchrun,
        "-m",
        "verl.trainer.sft_trainer",
        f"--config-path={config_dir}",
        f"--config-name={CONFIG_NAME}",
        *overrides,
    ]


# ------------------------------------------------------------------------------------------------ run
def train_log(run_dir: Path, node_rank: int = 0) -> Path:
    """Where a node's launcher appends the trainer's output: ``train.log`` on node 0, ``train.node<k>.log``
    on node k (the nodes of a cluster share the run folder)."""
    return run_dir / ("train.log" if node_rank == 0 else f"train.node{node_rank}.log")


def run_trainer(
    cmd: list[str], run_dir: Path, env: dict[str, str], node_rank: int = 0
) -> tuple[int, MetricsTail]:
    """Run the trainer with its file logger writing ``<run_dir>/metrics.jsonl``, echo its output and append
    it to :func:`train_log`. Returns the exit status and this launch's metrics as they arrived; the
    metrics file holds every launch of the run afterwards (see :mod:`e2c.sft.metrics`).

    The launcher of another node (``node_rank`` > 0; verl logs on global rank 0 only) shares the run folder
    on a cluster's file system: it leaves the metrics files alone."""
    metrics = run_dir / METRICS
    first = node_rank == 0
    if first:
        keep_metrics(run_dir)  # earlier launches' steps: verl truncates the file when it opens it
        metrics.unlink(missing_ok=True)  # the tail below then sees this launch's records only
    tail, stop = MetricsTail(metrics), threading.Event()
    watcher = watch(tail, stop)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        with RecordFile(train_log(run_dir, node_rank)) as logf:
            logf.write_text(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n")
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**env, PATH_ENV: str(metrics)},
                text=True,
                bufsize=1,
                cwd=project_root(),
            )
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    sys.stdout.write(line)
                    sys.stdout.flush()
                    logf.write_text(line)
            # An interrupt, or a log that cannot be written (a full disk: neither can the checkpoints), stops
            # the trainer. torchrun stops its workers on SIGTERM; they sit in sessions of their own, out of
            # reach of a signal to this process group, so the launcher must not end before torchrun has.
            except (KeyboardInterrupt, UserError):
                proc.terminate()
                proc.wait()
                raise
            return proc.wait(), tail
    finally:
        stop.set()
        watcher.join()
        if first:
            restore_metrics(run_dir)
