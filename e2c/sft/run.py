"""SFT and EF-SFT on verl's SFT trainer (``bash scripts/e2c_sft.sh`` / ``bash scripts/ef-sft.sh`` wrap this).

    python -m e2c.sft.run --mode sft                         # GPUs found: Qwen/Qwen3-8B, full E2C chains
    python -m e2c.sft.run --mode ef-sft --model embedded --total-steps 6      # CPU demo, no hub needed
    python -m e2c.sft.run --mode sft --model tiny --total-steps 3 data.train_batch_size=4   # Hydra overrides

What it does, in order:

1. checks the data (the processed ``sft`` / ``ef_sft`` schema), the Hydra overrides (composed in-process,
   :mod:`e2c.launch_checks`), the output folder and the model spec, each failure one line;
2. gives the base model the four E2C tags if its tokenizer lacks them: a tagged copy is saved once to
   ``--tagged-dir`` (default ``models/base/<name>-e2c``) and reused;
3. launches ``torchrun -m verl.trainer.sft_trainer --config-name e2c_sft`` (``configs/e2c_sft.yaml``) with
   the E2C dataset class (:mod:`e2c.sft.dataset`): full chains for ``sft``, exploration-only rows for
   ``ef-sft``. GPUs are counted from ``CUDA_VISIBLE_DEVICES`` or ``nvidia-smi``; with none, one CPU
   process runs with CPU overrides (FSDP2 on gloo, sdpa attention, small batches);
4. converts verl's last checkpoint to a plain Hugging Face folder with verl's model merger and moves it
   atomically to ``<output-dir>/final`` (config, safetensors, tokenizer with the tags);
5. prints a table of the logged losses and, as its last line, one JSON object (final folder, steps, losses,
   seconds per step, trained-token share).

Departures from the paper: the maximum length is 8,192 tokens, not 1,000 (which cuts most executions);
rows longer than that are skipped and counted (``data.overlong``), never silently truncated. A re-run with
the same output folder resumes from verl's last checkpoint; a finished run is not repeated (``--force``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.cli import ArgumentParser, UserError, fail, quiet_transformers

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "configs"
CONFIG_NAME = "e2c_sft"
GPU_MODEL = "Qwen/Qwen3-8B"
CPU_MODEL = "embedded"
CPU_STEPS = 20
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
# One CPU process: verl's FSDP2 engine on gloo (see e2c.verl_cpu), sdpa instead of flash attention, no
# torch.compile, no data-loader workers (2 cores), small batches. Hydra overrides given later win.
CPU_OVERRIDES = (
    "trainer.device=cpu",
    "model.override_config.attn_implementation=sdpa",
    "model.enable_gradient_checkpointing=False",
    "engine.use_torch_compile=False",
    "data.num_workers=0",
    "data.train_batch_size=8",
    "data.micro_batch_size_per_gpu=4",
)
STEP_RE = re.compile(r"step:(\d+) - .*?train/loss:([-+0-9.eEnaif]+)")
VAL_RE = re.compile(r"step:(\d+) - .*?val/loss:([-+0-9.eEnaif]+)")


# ------------------------------------------------------------------------------------------------ devices
def count_gpus(env: dict[str, str] | None = None) -> int:
    """GPUs this node would use: ``CUDA_VISIBLE_DEVICES`` if set (empty or ``-1``: none), else the lines of
    ``nvidia-smi -L`` (0 without the tool). ``E2C_FORCE_CPU=1`` forces 0."""
    env = dict(os.environ if env is None else env)
    if env.get("E2C_FORCE_CPU") == "1":
        return 0
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        ids = [d.strip() for d in cvd.split(",") if d.strip()]
        return 0 if not ids or ids[0] == "-1" else len(ids)
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


# ------------------------------------------------------------------------------------------------ model
def tagged_model(spec: str, tagged_dir: str | None, subfolder: str | None = None) -> tuple[str, str]:
    """A model folder whose tokenizer has the E2C tags: the resolved folder itself, or a tagged copy
    (made once, atomically, then reused). Returns (folder, note)."""
    from transformers import AutoTokenizer

    from e2c.models import ModelSpecError, missing_chain_tokens, resolve_model

    try:
        res = resolve_model(spec, subfolder)
    except ModelSpecError as e:
        raise UserError(str(e)) from None
    path = os.path.abspath(res.path)  # the trainer runs in the repository, not in the caller's folder
    from e2c.launch_checks import check_model_folder

    check_model_folder(path)
    try:
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise UserError(f"model {path} has no loadable tokenizer ({str(e).splitlines()[0]})") from None
    if not missing_chain_tokens(tok):
        return path, f"{res.description} (has the E2C tags)"
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(path).name) or "model"
    out = Path(tagged_dir) if tagged_dir else ROOT / "models" / "base" / f"{name}-e2c"
    if (out / "config.json").is_file():
        if missing_chain_tokens(AutoTokenizer.from_pretrained(out)):
            raise UserError(
                f"{out} exists but its tokenizer lacks the E2C tags; remove it or pick --tagged-dir"
            )
        return str(out), f"tagged copy {out} (reused)"
    from transformers import AutoModelForCausalLM

    from e2c.models import _atomic_save, ensure_chain_tokens

    print(f"adding the E2C tags to {path} -> {out}", flush=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype="auto")
    except (OSError, ValueError) as e:
        raise UserError(f"model {path} has no loadable weights ({str(e).splitlines()[0]})") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    ensure_chain_tokens(model, tok)
    _atomic_save(out, model, tok)
    return str(out), f"tagged copy {out} of {res.description} (made now)"


# ------------------------------------------------------------------------------------------------ command
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

    @property
    def ckpt_dir(self) -> Path:
        return self.output_dir / "verl"

    @property
    def final_dir(self) -> Path:
        return self.output_dir / "final"

    @property
    def stats_path(self) -> Path:
        return self.output_dir / "sft_data_stats.json"


def _listing(files: list[str]) -> str:
    return files[0] if len(files) == 1 else "[" + ",".join(files) + "]"


def hydra_overrides(plan: Plan, total_steps: int | None) -> list[str]:
    """The Hydra overrides for verl's SFT trainer; the user's own come last and win."""
    cls = MODES[plan.mode][2]
    ov = [
        f"model.path={plan.model}",
        f"data.train_files={_listing(plan.train)}",
        f"data.val_files={_listing(plan.val) if plan.val else 'null'}",
        f"data.custom_cls.name={cls}",
        f"data.stats_path={plan.stats_path}",
        f"trainer.default_local_dir={plan.ckpt_dir}",
        f"trainer.experiment_name={plan.mode}",
        f"trainer.nnodes={plan.nnodes}",
        f"trainer.n_gpus_per_node={max(plan.gpus, 1)}",
        # Hydra's own files (the composed config, its log) stay with the run, not in the repository's outputs/.
        f"hydra.run.dir={plan.output_dir / 'hydra'}/${{now:%Y-%m-%d_%H-%M-%S}}",
    ]
    if total_steps is not None:
        ov.append(f"trainer.total_training_steps={total_steps}")
    if plan.gpus == 0:
        ov.extend(CPU_OVERRIDES)
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
    torchrun.append(f"--nproc_per_node={max(plan.gpus, 1)}")
    return [
        *torchrun,
        "-m",
        "verl.trainer.sft_trainer",
        f"--config-path={config_dir}",
        f"--config-name={CONFIG_NAME}",
        *overrides,
    ]


@dataclass
class TrainLog:
    """What the trainer printed that we keep: losses per step and when each step line arrived."""

    losses: dict[int, float] = field(default_factory=dict)
    val_losses: dict[int, float] = field(default_factory=dict)
    step_times: dict[int, float] = field(default_factory=dict)

    def feed(self, line: str, now: float) -> None:
        for m in STEP_RE.finditer(line):
            step = int(m.group(1))
            self.losses[step] = float(m.group(2))
            self.step_times[step] = now
        for m in VAL_RE.finditer(line):
            self.val_losses[int(m.group(1))] = float(m.group(2))

    def seconds_per_step(self) -> float | None:
        """Median gap between consecutive step lines, the first step (warm-up) left out."""
        steps = sorted(self.step_times)
        gaps = sorted(
            self.step_times[b] - self.step_times[a] for a, b in itertools.pairwise(steps) if b == a + 1
        )
        if not gaps:
            return None
        return gaps[len(gaps) // 2]


def run_trainer(cmd: list[str], log_path: Path, env: dict[str, str]) -> tuple[int, TrainLog]:
    """Run the trainer, echo and save its output, and collect the losses."""
    log = TrainLog()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as logf:
        logf.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n")
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, bufsize=1, cwd=ROOT
        )
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                logf.write(line)
                log.feed(line, time.monotonic())
        except KeyboardInterrupt:
            proc.terminate()
        return proc.wait(), log


# ------------------------------------------------------------------------------------------------ export
def latest_checkpoint(ckpt_dir: Path) -> Path | None:
    """verl's last saved ``global_step_N`` folder (from its tracker file), or None."""
    tracker = ckpt_dir / "latest_checkpointed_iteration.txt"
    if not tracker.is_file():
        return None
    step = tracker.read_text().strip()
    folder = ckpt_dir / f"global_step_{step}"
    return folder if folder.is_dir() else None


def export_final(ckpt: Path, final_dir: Path, meta: dict[str, Any]) -> Path:
    """Write a plain HF folder for ``ckpt`` to ``final_dir`` atomically.

    verl already wrote the weights under ``huggingface/`` when ``checkpoint.save_contents`` includes
    ``hf_model``; otherwise verl's model merger turns the FSDP shards into safetensors (bf16). The folder
    is built next to ``final_dir`` and swapped in by rename, so a killed export leaves the old one.
    """
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=final_dir.name + ".tmp", dir=final_dir.parent))
    try:
        hf = ckpt / "huggingface"
        if any(hf.glob("*.safetensors")):
            shutil.copytree(hf, tmp, dirs_exist_ok=True)
        else:
            cmd = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
                   "--local_dir", str(ckpt), "--target_dir", str(tmp)]  # fmt: skip
            res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
            if res.returncode != 0 or not any(tmp.glob("*.safetensors")):
                tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
                raise UserError(f"verl's model merger failed on {ckpt}: {' | '.join(tail)}")
        # mkdtemp makes the folder 0700 and the weights come out 0600: a model folder is for sharing.
        tmp.chmod(0o755)
        for f in tmp.glob("*.safetensors"):
            f.chmod(0o644)
        _check_tags(tmp)
        (tmp / "e2c_sft.json").write_text(json.dumps(meta, indent=2))
        old = final_dir.with_name(final_dir.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        if final_dir.exists():
            os.replace(final_dir, old)
        os.replace(tmp, final_dir)
        if old.exists():
            shutil.rmtree(old)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final_dir


def _check_tags(folder: Path) -> None:
    from transformers import AutoTokenizer

    from e2c.models import missing_chain_tokens

    missing = missing_chain_tokens(AutoTokenizer.from_pretrained(folder))
    if missing:
        raise UserError(f"the exported tokenizer in {folder} lacks the E2C tags {missing}")


# ------------------------------------------------------------------------------------------------ CLI
def _existing(paths: list[str], what: str) -> list[str]:
    out = []
    for p in paths:
        path = Path(p).expanduser()
        if not path.is_absolute():
            path = (Path.cwd() / path) if (Path.cwd() / path).exists() else ROOT / path
        if not path.is_file():
            raise UserError(f"{what} file not found: {p}")
        out.append(str(path.resolve()))
    return out


def _default_file(candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if (ROOT / c).is_file()), None)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="python -m e2c.sft.run",
        description=__doc__.split("\n\n")[0],
        epilog="Anything else of the form key=value is passed to verl's SFT trainer as a Hydra override.",
    )
    a = p.add_argument
    a(
        "--mode",
        choices=sorted(MODES),
        default="sft",
        help="sft: full E2C chains; ef-sft: exploration-only rows (default: sft)",
    )
    a(
        "--model",
        default=None,
        help=f"base model: HF id, folder, 'embedded' or 'tiny' (default: {GPU_MODEL} with GPUs, {CPU_MODEL} on CPU)",
    )
    a(
        "--subfolder",
        default=None,
        help="subfolder of the model (e.g. 8B for the released checkpoint; default: none)",
    )
    a(
        "--train-data",
        default=None,
        help="training parquet, comma-separated for several (default: the mode's processed file)",
    )
    a(
        "--val-data",
        default=None,
        help="validation parquet(s); 'none' for no validation (default: the paper's split when present)",
    )
    a(
        "--output-dir",
        default=None,
        help="run folder: verl checkpoints in verl/, the HF model in final/ (default: models/checkpoints/<mode>)",
    )
    a(
        "--total-steps",
        type=int,
        default=None,
        help=f"optimizer steps (default: all epochs with GPUs, {CPU_STEPS} on CPU)",
    )
    a(
        "--gpus",
        type=int,
        default=None,
        help="GPUs per node (default: counted from CUDA_VISIBLE_DEVICES or nvidia-smi; 0 = CPU)",
    )
    a(
        "--nnodes",
        type=int,
        default=1,
        help="nodes; above 1 set MASTER_ADDR, MASTER_PORT and NODE_RANK on each node (default: 1)",
    )
    a("--node-rank", type=int, default=None, help="this node's rank (default: $NODE_RANK or 0)")
    a(
        "--tagged-dir",
        default=None,
        help="where a base model without E2C tags gets its tagged copy (default: models/base/<name>-e2c)",
    )
    a("--config-dir", default=str(CONFIG_DIR), help=f"folder of {CONFIG_NAME}.yaml (default: {CONFIG_DIR})")
    a("--force", action="store_true", help="train again even if <output-dir>/final exists for a finished run")
    a("--dry-run", action="store_true", help="print the trainer command and exit")
    return p


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    args, rest = build_parser().parse_known_args(argv)
    rest = [r for r in rest if r != "--"]  # the RL scripts' way of marking Hydra overrides works here too
    bad = [r for r in rest if r.startswith("-") or "=" not in r]
    if bad:
        raise UserError(
            f"unrecognized argument {bad[0]!r}: flags are listed by --help, Hydra overrides look like key=value"
        )
    # Checked before anything is resolved or written (the model's tagged copy, the run folder).
    if args.total_steps is not None and args.total_steps < 1:
        raise UserError(f"--total-steps must be at least 1 (TOTAL_TRAINING_STEPS), got {args.total_steps}")
    return args, rest


def node_rank(args: argparse.Namespace) -> int:
    """--node-rank, else $NODE_RANK, else 0; within the nodes."""
    rank = args.node_rank
    if rank is None:
        env = os.environ.get("NODE_RANK", "0")
        try:
            rank = int(env)
        except ValueError:
            raise UserError(f"NODE_RANK must be a whole number, got {env!r}") from None
    if rank < 0 or rank >= max(args.nnodes, 1):
        raise UserError(f"--node-rank (NODE_RANK) must be in 0..{max(args.nnodes, 1) - 1}, got {rank}")
    return rank


def make_plan(args: argparse.Namespace, overrides: list[str]) -> Plan:
    """Resolve data, devices and the model (tagging it if needed); every problem is one UserError line."""
    train_default, val_default, _cls, schema, out_default = MODES[args.mode]
    gpus = count_gpus() if args.gpus is None else args.gpus
    if gpus < 0 or args.nnodes < 1:
        raise UserError("--gpus must be >= 0 and --nnodes >= 1")
    if gpus == 0 and args.nnodes > 1:
        raise UserError("CPU mode runs on one node; set --nnodes 1 or give GPUs")
    rank = node_rank(args)
    train_arg = args.train_data or _default_file(train_default)
    if not train_arg:
        raise UserError(
            f"no training data: none of {', '.join(train_default)} exists; run "
            "`bash scripts/prepare_all_data.sh --skip-download` or pass --train-data"
        )
    train = _existing([t for t in train_arg.split(",") if t], "training data")
    if args.val_data and args.val_data.lower() != "none":
        val = _existing([v for v in args.val_data.split(",") if v], "validation data")
    elif args.val_data is None and args.train_data is None and _default_file(val_default):
        val = _existing([_default_file(val_default)], "validation data")  # type: ignore[list-item]
    else:
        val = []
    from e2c.files import ensure_output_dir
    from e2c.launch_checks import check_data_file, compose_checked

    for f in train:
        check_data_file(f, "training data", schema, DATA_SUFFIXES, "--train-data (TRAIN_DATA)")
    for f in val:
        check_data_file(f, "validation data", schema, DATA_SUFFIXES, "--val-data (VAL_DATA)")
    # The user's overrides, composed as the trainer will, before the model is tagged (which writes a copy).
    compose_checked(Path(args.config_dir), CONFIG_NAME, list(CPU_OVERRIDES) if gpus == 0 else [], overrides)
    out = ensure_output_dir(
        Path(args.output_dir or ROOT / out_default).expanduser().resolve(), "output folder"
    )
    model, note = tagged_model(
        args.model or (GPU_MODEL if gpus else CPU_MODEL), args.tagged_dir, args.subfolder
    )
    return Plan(args.mode, model, note, train, val, out, gpus, args.nnodes, rank, overrides)


def _finished(plan: Plan, total_steps: int | None) -> bool:
    meta = plan.final_dir / "e2c_sft.json"
    if not meta.is_file():
        return False
    try:
        done = json.loads(meta.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    same = {"mode": plan.mode, "base_model": plan.model, "train_files": plan.train, "val_files": plan.val,
            "total_steps_requested": total_steps, "overrides": plan.overrides}  # fmt: skip
    return all(done.get(k) == v for k, v in same.items())


def main(argv: list[str] | None = None) -> int:
    quiet_transformers()
    try:
        args, overrides = parse(argv)
        plan = make_plan(args, overrides)
    except UserError as e:
        fail(str(e))
    total = args.total_steps if args.total_steps is not None else (None if plan.gpus else CPU_STEPS)
    ov = hydra_overrides(plan, total)
    try:
        cmd = launch_command(plan, ov, Path(args.config_dir).resolve())
    except UserError as e:
        fail(str(e))
    print(
        f"e2c sft: mode {plan.mode}, model {plan.model_note}, {plan.gpus or 'no'} GPU(s) x {plan.nnodes} node(s)"
    )
    print(f"e2c sft: train {', '.join(plan.train)}; output {plan.output_dir}", flush=True)
    if args.dry_run:
        print(shlex.join(cmd))  # quoted: ${now:...} and [a,b] survive a paste into a shell
        return 0
    if not args.force and _finished(plan, total):
        print(f"e2c sft: {plan.final_dir} is already the result of this run (use --force to train again)")
        return 0
    if args.force and plan.ckpt_dir.exists() and plan.node_rank == 0:
        shutil.rmtree(plan.ckpt_dir)  # verl would resume from it; --force means from scratch
    env = dict(os.environ)
    if plan.gpus == 0:
        env.setdefault("E2C_FORCE_CPU", "1")  # the verl plugin picks its CPU platform in every process
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    t0 = time.monotonic()
    rc, log = run_trainer(cmd, plan.output_dir / "train.log", env)
    wall = time.monotonic() - t0
    if rc != 0:
        fail(
            f"verl's SFT trainer exited with status {rc}; its output is in {plan.output_dir / 'train.log'}", 1
        )
    if plan.node_rank != 0:
        return 0  # rank-0 node exports
    ckpt = latest_checkpoint(plan.ckpt_dir)
    if ckpt is None:
        fail(f"the trainer finished but left no checkpoint in {plan.ckpt_dir}", 1)
    stats = {}
    if plan.stats_path.is_file():
        stats = json.loads(plan.stats_path.read_text()).get(",".join(plan.train), {})
    meta = {
        "mode": plan.mode,
        "base_model": plan.model,
        "train_files": plan.train,
        "val_files": plan.val,
        "checkpoint": str(ckpt),
        "total_steps_requested": total,
        "overrides": plan.overrides,
        "losses": {str(k): v for k, v in sorted(log.losses.items())},
        "val_losses": {str(k): v for k, v in sorted(log.val_losses.items())},
        "seconds_per_step": log.seconds_per_step(),
        "wall_seconds": round(wall, 1),
        "trained_share": stats.get("trained_share"),
        "trained_tokens": stats.get("trained_tokens"),
        "assistant_tokens": stats.get("assistant_tokens"),
    }
    try:
        final = export_final(ckpt, plan.final_dir, meta)
    except UserError as e:
        fail(str(e), 1)
    print("\nstep  loss")
    for k, v in sorted(log.losses.items()):
        print(f"{k:>4}  {v:.4f}")
    print(json.dumps({"final": str(final), **{k: meta[k] for k in ("mode", "losses", "seconds_per_step",
                                                                    "wall_seconds", "trained_share")}}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
