"""Launch E2C RL (GRPO or DAPO, stage 1 or 2) on verl: ``python -m e2c.rl.launch`` (wrapped by
``scripts/e2c_rl.sh`` and ``scripts/e2c_dapo.sh``).

The launcher picks the stage's Hydra config (``configs/e2c_<algo>.yaml`` with ``e2c_stage=stage<N>``,
inheriting verl's ``ppo_trainer``), resolves the model, hands stage 1's final checkpoint to stage 2, and adds the overrides
that make the same config run here:

- GPU (CUDA visible): vLLM rollout, the config's sizes, ``n_gpus_per_node`` from the visible GPUs.
- CPU (no CUDA): the overrides of ``configs/cpu/rl.yaml``: the ``hf`` rollout and CPU platform that
  :mod:`e2c.rl.plugin` registers, FSDP2 with SDPA attention, ray with logical GPUs, one transfer-queue
  storage unit, and a small size preset (batch 4, n 4, 256+128 tokens) that any override given after
  ``--`` replaces.

Before verl starts, the launcher composes the config with every override in-process and checks the data
files (the rl schema) and the model folder (:mod:`e2c.launch_checks`), the ``e2c`` settings group
(:mod:`e2c.rl.settings`) and the output folder (:func:`e2c.files.ensure_output_dir`): bad input is one
``error:`` line and exit 2, never a traceback from inside verl minutes later. Hydra's own files go to
``<output-dir>/hydra/<time>``.

Stage hand-off: every checkpoint also saves a plain HF folder (``actor/huggingface``); stage 2 starts from
the latest one of stage 1's output folder (``--stage1-dir``, default stage 1's default ``--output-dir``) and
fails with one line if there is none (it never falls back to the SFT model). ``--model`` starts stage 2 from
another model instead; given with ``--stage1-dir`` it is refused, as the two name different start models.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from e2c.checkpoints import METRICS, TRACKER, keep_metrics, latest_checkpoint, restore_metrics
from e2c.cli import ArgumentParser, UserError, fail
from e2c.devices import gpu_count
from e2c.files import ensure_output_dir
from e2c.lora import LORA_META, add_lora_args, lora_overrides, merge_checkpoint_folder
from e2c.paths import configs_dir, project_root
from e2c.presets import cpu_preset
from e2c.tracking import DEFAULT_LOGGERS, LOGGER_HELP, logger_override, tracker_env, tracker_names
from e2c.verl_cpu.hf_rollout import SYNC_LOG, SYNC_LOG_ENV

ALGOS = ("grpo", "dapo")
# What verl's RL dataset reads (verl.utils.dataset.rl_dataset).
DATA_SUFFIXES = (".parquet", ".json", ".jsonl")
STAGES = (1, 2)
MODEL_KEY = "actor_rollout_ref.model"
VAL_GENERATIONS = 4  # a few chains per validation, as verl's log_val_generations
VAL_DIR = "val_generations"
RAY_RESOURCE_KEYS = ("ray_kwargs.ray_init.num_cpus", "ray_kwargs.ray_init.num_gpus")

# The CPU set-up (a size preset, then what verl needs without an accelerator), under configs_dir().


def cpu_overrides() -> dict[str, str]:
    """``configs/cpu/rl.yaml``'s overrides, key -> value: its ``preset`` section, then ``fixed``."""
    return cpu_preset("rl")


def config_name(algo: str) -> str:
    """The primary Hydra config of an algorithm (the stage is the ``e2c_stage`` group)."""
    return f"e2c_{algo}"


def default_output_dir(algo: str, stage: int) -> Path:
    """A stage's run folder unless ``--output-dir`` names one: ``models/checkpoints/rl/<algo>_stage<N>``."""
    return project_root() / "models" / "checkpoints" / "rl" / f"{algo}_stage{stage}"


def default_sft_model() -> Path:
    """Where the SFT scripts leave their final model: stage 1 (and the curriculum) start there by default."""
    return project_root() / "models" / "checkpoints" / "sft" / "final"


def latest_hf_checkpoint(run_dir: Path) -> Path:
    """The HF folder of the latest complete checkpoint of a verl run folder.

    verl writes its tracker file (:data:`e2c.checkpoints.TRACKER`) after a checkpoint is complete; its
    step's ``actor/huggingface`` folder must hold a config and weights. Raises :class:`UserError` otherwise.
    """
    if not run_dir.is_dir():
        raise UserError(
            f"no finished checkpoint in {run_dir}: the folder does not exist; run stage 1 first "
            "(bash scripts/e2c_rl.sh --stage 1) "
            "or pass --stage1-dir with stage 1's --output-dir"
        )
    step = latest_checkpoint(run_dir)
    if step is None:
        raise UserError(
            f"no finished checkpoint in {run_dir} (no {TRACKER} naming a saved step); run stage 1 first "
            "(bash scripts/e2c_rl.sh --stage 1) or pass --model"
        )
    hf = step / "actor" / "huggingface"
    if not (hf / "config.json").is_file() or not any(hf.glob("*.safetensors")):
        raise UserError(
            f"checkpoint {hf} has no HF weights (config.json + *.safetensors); cannot start stage 2"
        )
    plain_lora_checkpoint(step)  # a run killed before the launcher merged its adapters
    return hf


def plain_lora_checkpoint(step: Path) -> int:
    """A LoRA run's checkpoint as a plain model: verl saves ``actor/huggingface`` with PEFT's parameter
    names, which no loader of plain models reads; merge the adapter into it (:func:`e2c.lora.merge_peft_folder`).
    Returns the number of merged weights; 0 for a full fine-tuning checkpoint or one already merged."""
    hf = step / "actor" / "huggingface"
    if not any(hf.glob("*.safetensors")):
        return 0
    return merge_checkpoint_folder(hf, step / "actor" / LORA_META)


def plain_lora_checkpoints(run_dir: Path) -> None:
    """After a run: every saved step of a LoRA run as a plain model (eval, TTS and stage 2 load these)."""
    for step in sorted(run_dir.glob("global_step_*")):
        if n := plain_lora_checkpoint(step):
            print(f"[e2c-rl] merged the LoRA adapter into {n} weights of {step / 'actor' / 'huggingface'}")


def resolve_model_path(spec: str) -> str:
    """tiny | embedded | a folder | an HF id -> a loadable folder (one line on failure)."""
    from e2c.models import ModelSpecError, resolve_model

    try:
        # Absolute: verl runs in the project folder, not the caller's.
        path = os.path.abspath(resolve_model(spec).path)
    except ModelSpecError as e:
        raise UserError(str(e)) from e
    from e2c.launch_checks import check_model_folder

    check_model_folder(path)
    return path


def build_overrides(args: argparse.Namespace, gpus: int) -> list[str]:
    """The launcher's Hydra overrides for this launch (CPU preset first); the user's own come after them
    and win."""
    out: dict[str, str] = {}
    if gpus == 0:
        cpu = cpu_overrides()
        if os.environ.get("RAY_ADDRESS"):
            # An existing cluster (scripts/slurm_e2c.sbatch) brings its own CPUs and GPUs: ray refuses
            # resource counts from a driver that joins one.
            cpu = {k: v for k, v in cpu.items() if k.lstrip("+") not in RAY_RESOURCE_KEYS}
        out.update(cpu)
    else:
        out["trainer.n_gpus_per_node"] = str(gpus)
        out["trainer.nnodes"] = str(args.nnodes)
    out[f"{MODEL_KEY}.path"] = args.model_path
    out.update(lora_overrides(args, MODEL_KEY))
    out["trainer.default_local_dir"] = str(args.output_dir)
    # Per-step metrics as JSON lines next to the checkpoints (verl's file logger runs in the task runner and
    # truncates the file: main() keeps earlier launches' steps in metrics_history.jsonl and merges them back).
    trackers = tracker_names(args.logger)
    out["trainer.logger"] = logger_override(trackers)
    out["+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"] = str(args.output_dir / METRICS)
    env = {**tracker_env(trackers, args.output_dir), SYNC_LOG_ENV: str(args.output_dir / SYNC_LOG)}
    for key, value in env.items():
        out[f"+ray_kwargs.ray_init.runtime_env.env_vars.{key}"] = value
    # Hydra's own files (the composed config, its log) stay with the run, not in the repository's outputs/.
    out["hydra.run.dir"] = str(args.output_dir / "hydra" / "${now:%Y-%m-%d_%H-%M-%S}")
    if args.train_data:
        out["data.train_files"] = args.train_data
    if args.val_data:
        out["data.val_files"] = args.val_data
    if args.val_generations:
        out["trainer.log_val_generations"] = str(args.val_generations)
        out["trainer.validation_data_dir"] = str(args.output_dir / VAL_DIR)
    if args.steps is not None:
        out["trainer.total_training_steps"] = str(args.steps)
    if args.save_freq is not None:
        out["trainer.save_freq"] = str(args.save_freq)
    if args.explore_budget:
        out["e2c.rollout.explore_budget"] = str(args.explore_budget)
    if args.execute_budget:
        out["e2c.rollout.execute_budget"] = str(args.execute_budget)
    if args.explore_coef is not None:
        out["e2c.explore_adv_coef"] = str(args.explore_coef)
    if args.dr_grpo:
        out["algorithm.norm_adv_by_std_in_grpo"] = "false"
    return [f"{k}={v}" for k, v in out.items()]


def data_files(value: Any) -> list[str]:
    """The files of a ``data.train_files`` / ``data.val_files`` value (a path, a comma list or a list)."""
    items = [value] if isinstance(value, str) else list(value or [])
    return [p.strip() for item in items for p in str(item).split(",") if p.strip()]


def check_data(cfg: Any) -> None:
    """The data files the composed config names exist and fit the rl schema (remote ones are verl's)."""
    from e2c.launch_checks import check_data_file

    for key, what, flag in (
        ("train_files", "training data", "--train-data (TRAIN_DATA)"),
        ("val_files", "validation data", "--val-data (VAL_DATA)"),
    ):
        for f in data_files(cfg.data.get(key)):
            if "://" not in f:
                path = Path(f).expanduser()
                path = (
                    path if path.is_absolute() else project_root() / path
                )  # verl runs in the project folder
                check_data_file(str(path), what, "rl", DATA_SUFFIXES, flag)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = ArgumentParser(
        prog="e2c_rl",
        description="E2C RL on verl (GRPO or DAPO, stage 1 or 2). Overrides after -- go to Hydra.",
    )
    p.add_argument("--algo", choices=ALGOS, default="grpo", help="grpo (paper) or dapo (default grpo)")
    p.add_argument("--stage", type=int, choices=STAGES, default=1, help="1: warm-up, 2: weighted (default 1)")
    p.add_argument(
        "--model",
        default=None,
        help="stage 1: tiny|embedded|folder|HF id (default models/checkpoints/sft/final); "
        "stage 2: default is stage 1's latest checkpoint",
    )
    p.add_argument(
        "--stage1-dir",
        default=None,
        help="stage 2: stage 1's run folder to start from (default its output; not with --model)",
    )
    p.add_argument(
        "--train-data", default=None, help="RL parquet(s), comma-separated (default: the config's)"
    )
    p.add_argument("--val-data", default=None, help="validation parquet(s) (default: the config's)")
    p.add_argument(
        "--output-dir", default=None, help="run folder (default models/checkpoints/rl/<algo>_stage<N>)"
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="stop after this many steps, at least 1 (default: the config's epochs)",
    )
    p.add_argument("--save-freq", type=int, default=None, help="checkpoint every N steps (default: config)")
    p.add_argument(
        "--explore-budget", type=int, default=0, help="elastic exploration budget (0: single call)"
    )
    p.add_argument("--execute-budget", type=int, default=0, help="elastic execution budget (0: the rest)")
    p.add_argument(
        "--explore-coef", type=float, default=None, help="exploration advantage weight (default: stage)"
    )
    p.add_argument(
        "--dr-grpo",
        action="store_true",
        help="Dr. GRPO's advantage: subtract the group's mean reward, do not divide by its std (verl's "
        "algorithm.norm_adv_by_std_in_grpo=false); with the std, one small penalty in an otherwise equal "
        "group becomes a full-size advantage. The loss stays token-mean (Dr. GRPO's constant normaliser: "
        "-- actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm). Default: off (the paper's GRPO)",
    )
    p.add_argument("--nnodes", type=int, default=None, help="nodes (default $NNODES or 1)")
    p.add_argument("--logger", default=DEFAULT_LOGGERS, help=LOGGER_HELP)
    p.add_argument(
        "--val-generations",
        type=int,
        default=VAL_GENERATIONS,
        help="validation chains logged to the trackers as text, with reward and parse status; every "
        f"validation generation also goes to OUTPUT_DIR/{VAL_DIR}/<step>.jsonl (default: {VAL_GENERATIONS}; 0: neither)",
    )
    add_lora_args(p)
    p.add_argument("--dry-run", action="store_true", help="print the verl command and exit")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. trainer.total_epochs=3")
    args = p.parse_args(argv)
    if args.nnodes is None:
        env = os.environ.get("NNODES", "1")
        try:
            args.nnodes = int(env)
        except ValueError:
            raise UserError(f"NNODES must be a whole number of nodes, got {env!r}") from None
    check_numbers(args)
    tracker_names(args.logger)  # an unknown tracker is one line before anything starts
    lora_overrides(args, MODEL_KEY)
    return args


def check_numbers(args: argparse.Namespace) -> None:
    """Numbers that parse but make no run (verl would train 0 steps or fail inside a worker)."""
    if args.steps is not None and args.steps < 1:
        raise UserError(f"--steps must be at least 1 (TOTAL_TRAINING_STEPS), got {args.steps}")
    if args.nnodes < 1:
        raise UserError(f"--nnodes (NNODES) must be at least 1, got {args.nnodes}")
    for flag, value in (("--explore-budget", args.explore_budget), ("--execute-budget", args.execute_budget)):
        if value < 0:
            raise UserError(f"{flag} must be 0 (off) or a positive number of tokens, got {value}")
    if args.val_generations < 0:
        raise UserError(
            f"--val-generations must be 0 (off) or a number of chains, got {args.val_generations}"
        )
    if args.save_freq is not None and args.save_freq < -1:
        raise UserError(f"--save-freq must be a number of steps or -1 (never), got {args.save_freq}")
    if args.explore_coef is not None and not math.isfinite(args.explore_coef):
        raise UserError(f"--explore-coef must be a finite number, got {args.explore_coef}")
    if args.stage1_dir and args.stage != 2:
        raise UserError("--stage1-dir is the start of --stage 2; stage 1 starts from --model (MODEL_PATH)")
    if args.stage1_dir and args.model:
        raise UserError(
            f"--stage1-dir {args.stage1_dir} and --model (MODEL_PATH) {args.model} both pick stage 2's start "
            "model; pass one of them"
        )


def command(args: argparse.Namespace) -> list[str]:
    """Resolve everything and return the verl command line (raises UserError on bad input)."""
    gpus = gpu_count()
    if gpus == 0:
        # Read inside the CPU rollout's ray actor, where a bad value would end in a traceback: check it here.
        from e2c.verl_cpu.hf_rollout import rollout_dtype
        from e2c.verl_cpu.rollout_engine import rollout_engine

        try:
            rollout_engine()
            rollout_dtype()
        except ValueError as e:
            raise UserError(str(e)) from None
    args.output_dir = (
        Path(args.output_dir or default_output_dir(args.algo, args.stage)).expanduser().resolve()
    )
    if args.stage == 2 and args.model is None:
        stage1 = (
            Path(args.stage1_dir).expanduser().resolve()
            if args.stage1_dir
            else default_output_dir(args.algo, 1)
        )
        args.model_path = str(latest_hf_checkpoint(stage1))
        print(f"[e2c-rl] stage 2 starts from stage 1's checkpoint {args.model_path}", flush=True)
    else:
        spec = args.model or str(default_sft_model())
        if args.model is None and not Path(spec).exists():
            raise UserError(
                f"no SFT model at {spec}; run bash scripts/e2c_sft.sh first or pass --model (tiny|embedded|folder)"
            )
        args.model_path = resolve_model_path(spec)
    for attr in ("train_data", "val_data"):
        if getattr(args, attr):  # verl runs in the repository: relative paths are the caller's
            files = [
                str(Path(f).expanduser().resolve()) if "://" not in f else f
                for f in data_files(getattr(args, attr))
            ]
            setattr(args, attr, ",".join(files))
    overrides = build_overrides(args, gpus)
    from e2c.launch_checks import compose_checked
    from e2c.rl.settings import e2c_settings

    cfg = compose_checked(
        configs_dir(), config_name(args.algo), [f"e2c_stage=stage{args.stage}", *overrides], args.overrides
    )
    check_data(cfg)
    e2c_settings(cfg)  # an unknown or mistyped e2c.* key stops here, not inside a ray worker
    ensure_output_dir(args.output_dir, "output folder")
    return [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        f"--config-path={configs_dir()}",
        f"--config-name={config_name(args.algo)}",
        f"e2c_stage=stage{args.stage}",
        *overrides,
        *args.overrides,
    ]


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        cmd = command(args)
    except UserError as e:
        fail(str(e))
    if args.dry_run:
        print(shlex.join(cmd))  # quoted: ${now:...} and [a,b] survive a paste into a shell
        return 0
    env = dict(os.environ)
    env.setdefault("HYDRA_FULL_ERROR", "1")
    env.setdefault("RAY_DEDUP_LOGS", "0")
    print(f"[e2c-rl] {args.algo} stage {args.stage} -> {args.output_dir}", flush=True)
    keep_metrics(args.output_dir)
    try:
        return subprocess.call(cmd, env=env, cwd=project_root())
    finally:
        restore_metrics(args.output_dir)
        plain_lora_checkpoints(args.output_dir)


if __name__ == "__main__":
    sys.exit(main())
