"""Launch E2C RL (GRPO or DAPO, stage 1 or 2) on verl: ``python -m e2c.rl.launch`` (wrapped by
``scripts/e2c_rl.sh`` and ``scripts/e2c_dapo.sh``).

The launcher picks the stage's Hydra config, resolves the model, hands stage 1's latest checkpoint to stage 2
(never falling back to the SFT model), and adds the overrides that run it here: vLLM on GPUs, or
``configs/cpu/rl.yaml`` on a CPU. Before verl starts it composes the config with every override and checks
the data, the model folder, the ``e2c`` settings and verl's common fields by their value types, the
algorithm and stage, the batch arithmetic, the output folder and, on a CPU, the memory: bad input is one
``error:`` line, exit 2, never a traceback from inside verl. verl's own ray gets a private temp folder (mode
0700 parent) so that programs a code reward runs cannot reach the trainer's sockets.
More: docs/training.md, "RL on verl: GRPO, DAPO, the e3 curriculum".
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import MODEL, OUTPUT_DIR, TEXT, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, setting
from e2c.commandline.parsing import ArgumentParser, interrupt_on_sigterm
from e2c.core.errors import UserError
from e2c.core.files import check_output_dir, ensure_output_dir
from e2c.core.models import check_model_folder, resolve_model
from e2c.core.paths import configs_dir, project_root
from e2c.core.run_folder import FORCE_HELP, RunFolder, identity_overrides, local_paths
from e2c.launch.batch_shapes import Cluster, check_rl, longest_sequence, padded_samples, stage_label
from e2c.launch.checkpoints import (
    METRICS,
    STEPS_KEY,
    TRACKER,
    keep_metrics,
    latest_checkpoint,
    restore_metrics,
    rewind_unlogged,
    step_metrics,
    trained_to,
)
from e2c.launch.checks import (
    DATA_FILES,
    _quiet_fds,
    check_data_file,
    closest_key,
    compose_checked,
    hydra_list,
    hydra_value,
    verl_rl_checks,
)
from e2c.launch.cluster import private_ray_dir, remove_private_ray_dir
from e2c.launch.devices import (
    MAX_NODES,
    cpu_note,
    cpu_ranks,
    cpu_train_dtype,
    env_count,
    gpu_count,
    requested_gpus,
)
from e2c.launch.fork import fork_refusal, run_module
from e2c.launch.lora import LORA_META, add_lora_args, lora_overrides, merge_checkpoint_folder
from e2c.launch.presets import cpu_preset
from e2c.launch.tracking import DEFAULT_LOGGERS, LOGGER_HELP, logger_override, tracker_env, tracker_names
from e2c.rewards.shape import overlong_problem
from e2c.rewards.verl_score import CODE_REWARD_KEY, CODE_REWARDS, code_reward_mode
from e2c.rl import memory
from e2c.rl.memory import allocator_line, check_disabled, worker_allocator_env
from e2c.rl.settings import GROUP, ON_POLICY_LOSS, E2CSettings, e2c_settings, setting_flags
from e2c.sandbox import SANDBOX_ENV, SANDBOX_HELP, WORKERS_ENV, SandboxSpec, ready, workers_setting
from e2c.sandbox import setting as sandbox_setting
from e2c.verl_cpu import plain_attention_config
from e2c.verl_cpu.hf_rollout import SYNC_LOG, SYNC_LOG_ENV, rollout_dtype, sync_via
from e2c.verl_cpu.rollout_engine import rollout_engine

ALGOS = ("grpo", "dapo")
# What verl's RL dataset reads (verl.utils.dataset.rl_dataset).
DATA_SUFFIXES = (".parquet", ".json", ".jsonl")
STAGES = (1, 2)
STAGE_CHOICES = ("1", "2", "both")
# The paper's run folders, under the root (OUTPUT_DIR).
STAGE_FOLDERS = {1: "stage1-warmup", 2: "stage2-main"}
FINAL = "final"
# verl saves at the last step whenever save_freq > 0: this saves there and nowhere else.
LAST_STEP_ONLY = 10**9
SAVE_FREQ_KEY = "trainer.save_freq"
MODEL_KEY = "actor_rollout_ref.model"
VAL_GENERATIONS = 4  # a few chains per validation, as verl's log_val_generations
VAL_DIR = "val_generations"
RAY_RESOURCE_KEYS = ("ray_kwargs.ray_init.num_cpus", "ray_kwargs.ray_init.num_gpus")
# The settings class whose field metadata declares the E2C flags (a test swaps in a subclass).
SETTINGS: type[E2CSettings] = E2CSettings
NODES = whole(1, MAX_NODES)  # --nnodes and NNODES

# The CPU set-up (a size preset, then what verl needs without an accelerator), under configs_dir().


# The dtype the actor (and a reference model) compute in on a CPU: e2c.launch.devices.cpu_train_dtype.
TRAIN_DTYPE_KEYS = tuple(
    f"++actor_rollout_ref.{part}.fsdp_config.mixed_precision.param_dtype" for part in ("actor", "ref")
)


def cpu_overrides() -> dict[str, str]:
    """``configs/cpu/rl.yaml``'s overrides, key -> value: its ``preset`` section, then ``fixed``."""
    return cpu_preset("rl")


def config_name(algo: str) -> str:
    """The primary Hydra config of an algorithm (the stage is the ``e2c_stage`` group)."""
    return f"e2c_{algo}"


def default_root(algo: str) -> Path:
    """The parent of the stage folders unless ``--root-dir`` (``OUTPUT_DIR``) names one: the paper's
    ``models/checkpoints/rl`` for GRPO, ``models/checkpoints/rl/dapo`` for DAPO (so the two never mix)."""
    base = project_root() / "models" / "checkpoints" / "rl"
    return base if algo == "grpo" else base / algo


def default_output_dir(algo: str, stage: int, root: Path | None = None) -> Path:
    """A stage's run folder unless ``--output-dir`` names one: ``<root>/stage1-warmup`` or
    ``<root>/stage2-main``."""
    return (root or default_root(algo)) / STAGE_FOLDERS[stage]


def link_final(run_dir: Path) -> Path | None:
    """Point ``<run_dir>/final`` at the latest checkpoint's plain HF folder (a relative link, so the run
    folder can move). Returns the link, or None when the run saved no checkpoint; a real folder named
    ``final`` (the user's) is left alone."""
    step = latest_checkpoint(run_dir)
    if step is None:
        return None
    hf = step / "actor" / "huggingface"
    if not (hf / "config.json").is_file():
        return None
    final = run_dir / FINAL
    if final.exists() and not final.is_symlink():
        print(f"[e2c-rl] {final} exists and is not a link: left alone; the model is {hf}", flush=True)
        return None
    if final.is_symlink():
        final.unlink()
    final.symlink_to(hf.relative_to(run_dir), target_is_directory=True)
    return final


def default_sft_model() -> Path:
    """Where the SFT scripts leave their final model: stage 1 (and the curriculum) start there by default."""
    return project_root() / "models" / "checkpoints" / "sft" / "final"


def latest_hf_checkpoint(run_dir: Path) -> Path:
    """The HF folder of the latest complete checkpoint of a verl run folder.

    verl writes its tracker file (:data:`e2c.launch.checkpoints.TRACKER`) after a checkpoint is complete; its
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
    plain_checkpoint(step)  # a run killed before the launcher made its checkpoints plain
    return hf


def plain_checkpoint(step: Path) -> int:
    """A checkpoint's ``actor/huggingface`` as a plain model any loader reads: the training-only attention
    dropped from its config (:func:`e2c.verl_cpu.plain_attention_config`) and, for a LoRA run, the adapter
    merged into the weights verl saved with PEFT's parameter names (:func:`e2c.launch.lora.merge_peft_folder`).
    Returns the number of merged weights; 0 for a full fine-tuning checkpoint or one already merged."""
    hf = step / "actor" / "huggingface"
    plain_attention_config(hf)
    if not any(hf.glob("*.safetensors")):
        return 0
    return merge_checkpoint_folder(hf, step / "actor" / LORA_META)


def plain_checkpoints(run_dir: Path) -> None:
    """After a run: every saved step as a plain model (eval, TTS and stage 2 load these)."""
    for step in sorted(run_dir.glob("global_step_*")):
        if n := plain_checkpoint(step):
            print(f"[e2c-rl] merged the LoRA adapter into {n} weights of {step / 'actor' / 'huggingface'}")


def resolve_model_path(spec: str) -> str:
    """tiny | embedded | a folder | an HF id -> a loadable folder (one line on failure)."""
    # Absolute: verl runs in the project folder, not the caller's.
    path = os.path.abspath(resolve_model(spec).path)
    check_policy_folder(Path(path))
    return path


def check_policy_folder(folder: Path) -> None:
    """A start model verl can load, checked before ray starts (inside its workers a broken folder is pages
    of ray output): config, weight headers, a tokenizer that loads, and the chat template the RL dataset
    and the agent loop apply to every prompt."""
    check_model_folder(folder, chat_template=True)
    try:
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(str(folder))
    except Exception as e:  # tokenizers raises plain Exceptions (and KeyErrors) for a broken file
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        why = text if isinstance(e, OSError | ValueError) and text else f"{type(e).__name__}: {text}"
        raise UserError(f"model folder {folder}: its tokenizer does not load ({why})") from None


def cpu_shape(ranks: int, nnodes: int, joins_cluster: bool) -> dict[str, str]:
    """The GPU run's shape on a CPU: ``ranks`` logical GPUs per node (the paper's ``N_GPUS``), so verl
    starts that many FSDP actor ranks and rollout replicas per node. A local ray (no ``RAY_ADDRESS``) is one
    node holding every logical GPU; a cluster (``scripts/slurm_e2c.sbatch``, or ``ray start`` on several
    machines) brings its own.

    >>> cpu_shape(4, 1, False)["+ray_kwargs.ray_init.num_gpus"]
    '4'
    """
    out = {"trainer.n_gpus_per_node": str(ranks), "trainer.nnodes": str(nnodes)}
    if not joins_cluster:
        world = ranks * nnodes
        out["+ray_kwargs.ray_init.num_gpus"] = str(world)
        # Every rank and rollout replica is a ray actor that asks for CPUs: room for all of them.
        out["ray_kwargs.ray_init.num_cpus"] = str(max(8, 4 * world))
        # No dashboard for a local ray: its ten processes hold about 1 GiB and take ~4 CPU-seconds at each
        # start on a 2-core machine (measured 2026-12-08), and nothing here reads it.
        out["+ray_kwargs.ray_init.include_dashboard"] = "false"
    return out


# The CPU preset's micro-batch keys and which per-rank share each must divide (verl's prepare_micro_batches
# asserts it when dynamic batch sizes are off): a mini-batch's or a whole step's.
MICRO_BATCH_KEYS = {
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "mini",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": "step",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": "step",
}
# The token budget of a micro-batch with dynamic batch sizes (the CPU preset's): verl's rollout and reference
# log-prob budgets follow it unless set.
TOKEN_BUDGET_KEY = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
DYNAMIC_KEY = "actor_rollout_ref.actor.use_dynamic_bsz"


def cpu_micro_batches(cfg: Any, named: set[str]) -> dict[str, str]:
    """The CPU preset's micro-batches fitted to this run. Keys the user set (``named``) are left to the user
    and to :func:`e2c.launch.batch_shapes.check_rl`. Returns only the keys that change.

    With dynamic batch sizes (the preset's), a micro-batch holds up to ``ppo_max_token_len_per_gpu`` tokens
    and verl asserts that one sequence fits: the budget is raised to the longest sequence (prompt +
    response) when that is longer. With them turned off (``use_dynamic_bsz=false``), each micro-batch size
    is shrunk to divide each rank's share: with ``R`` ranks a rank holds ``ppo_mini_batch_size * n / R``
    samples per update and its share of the step's (padded) samples for the log-prob passes
    (:func:`e2c.launch.batch_shapes.padded_samples`).

    >>> from omegaconf import OmegaConf
    >>> cfg = OmegaConf.create({"trainer": {"n_gpus_per_node": 4, "nnodes": 1},
    ...     "data": {"train_batch_size": 4, "max_prompt_length": 256, "max_response_length": 2048},
    ...     "actor_rollout_ref": {"rollout": {"n": 4, "log_prob_micro_batch_size_per_gpu": 16},
    ...     "actor": {"ppo_mini_batch_size": 4, "ppo_micro_batch_size_per_gpu": 16, "use_dynamic_bsz": False,
    ...     "ppo_max_token_len_per_gpu": 2048}, "ref": {"log_prob_micro_batch_size_per_gpu": 16}}})
    >>> cpu_micro_batches(cfg, set())["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"]
    '4'
    >>> cfg.actor_rollout_ref.actor.use_dynamic_bsz = True
    >>> cpu_micro_batches(cfg, set())
    {'actor_rollout_ref.actor.ppo_max_token_len_per_gpu': '2304'}
    """
    from omegaconf import OmegaConf

    if bool(OmegaConf.select(cfg, DYNAMIC_KEY, default=False)):
        budget = OmegaConf.select(cfg, TOKEN_BUDGET_KEY)
        longest = longest_sequence(cfg)
        if TOKEN_BUDGET_KEY in named or budget is None or int(budget) >= longest:
            return {}
        return {TOKEN_BUDGET_KEY: str(longest)}
    world = int(cfg.trainer.n_gpus_per_node) * int(cfg.trainer.nnodes)
    n = int(cfg.actor_rollout_ref.rollout.n)
    mini = int(cfg.actor_rollout_ref.actor.ppo_mini_batch_size) * n
    share = {
        "mini": mini // world,
        "step": padded_samples(int(cfg.data.train_batch_size) * n, world, mini) // world,
    }
    out = {}
    for key, which in MICRO_BATCH_KEYS.items():
        micro = OmegaConf.select(cfg, key)
        if key in named or micro is None or share[which] < 1:
            continue
        fit = math.gcd(int(micro), share[which])
        if fit != int(micro):
            out[key] = str(fit)
    return out


def planned_cpu_config(user_overrides: list[str], algo: str = "grpo", stage: int = 2) -> Any:
    """The config a CPU launch with these Hydra overrides would run: the CPU preset at this machine's ranks,
    the user's overrides, the micro-batches fitted as :func:`command` fits them. For checks made before the
    launch, by a tool that will start it (the quickstart's memory check)."""
    from omegaconf import OmegaConf

    cpu = {
        **cpu_overrides(),
        **dict.fromkeys(TRAIN_DTYPE_KEYS, cpu_train_dtype()),
        **cpu_shape(cpu_ranks(), 1, joins_cluster=False),
    }
    fixed = [f"e2c_stage=stage{stage}", *(f"{k}={v}" for k, v in cpu.items())]
    cfg = compose_checked(configs_dir(), config_name(algo), fixed, user_overrides)
    named = {o.partition("=")[0].lstrip("+~") for o in user_overrides}
    for key, value in cpu_micro_batches(cfg, named).items():
        OmegaConf.update(cfg, key, int(value))
    return cfg


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
        out.update(dict.fromkeys(TRAIN_DTYPE_KEYS, cpu_train_dtype()))
        out.update(cpu_shape(cpu_ranks(), args.nnodes, joins_cluster=bool(os.environ.get("RAY_ADDRESS"))))
    else:
        out["trainer.n_gpus_per_node"] = str(gpus)
        out["trainer.nnodes"] = str(args.nnodes)
    # Paths go in quotes where Hydra would not read them plainly (a space, an accented letter).
    out[f"{MODEL_KEY}.path"] = hydra_value(str(args.model_path))
    out.update(lora_overrides(args, MODEL_KEY))
    out["trainer.default_local_dir"] = hydra_value(str(args.output_dir))
    # Per-step metrics as JSON lines next to the checkpoints (verl's file logger runs in the task runner and
    # truncates the file: main() keeps earlier launches' steps in metrics_history.jsonl and merges them back).
    trackers = tracker_names(args.logger)
    out["trainer.logger"] = logger_override(trackers)
    out["+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"] = hydra_value(
        str(args.output_dir / METRICS)
    )
    env = {**tracker_env(trackers, args.output_dir), SYNC_LOG_ENV: str(args.output_dir / SYNC_LOG)}
    env.update(sandbox_env(args))
    if gpus == 0:
        env.update(worker_allocator_env())
    for key, value in env.items():
        out[f"+ray_kwargs.ray_init.runtime_env.env_vars.{key}"] = hydra_value(value)
    # Hydra's own files (the composed config, its log) stay with the run, not in the repository's outputs/.
    out["hydra.run.dir"] = hydra_value(str(args.output_dir / "hydra"), "/${now:%Y-%m-%d_%H-%M-%S}")
    if args.train_data:
        out["data.train_files"] = hydra_list(data_files(args.train_data))
    if args.val_data:
        out["data.val_files"] = hydra_list(data_files(args.val_data))
    if args.val_generations:
        out["trainer.log_val_generations"] = str(args.val_generations)
        out["trainer.validation_data_dir"] = hydra_value(str(args.output_dir / VAL_DIR))
    if args.steps is not None:
        out[STEPS_KEY] = str(args.steps)
    if args.save_freq is not None:
        out["trainer.save_freq"] = str(args.save_freq)
    out.update(setting_overrides(args, SETTINGS))
    if args.code_reward is not None:
        # Where plan_bonus and require_format travel; "++": stage 1's config has no reward_kwargs to override.
        out[f"++{CODE_REWARD_KEY}"] = args.code_reward
    if args.dr_grpo:
        out["algorithm.norm_adv_by_std_in_grpo"] = "false"
    return [f"{k}={v}" for k, v in out.items()]


def data_files(value: Any) -> list[str]:
    """The files of a ``data.train_files`` / ``data.val_files`` value (a path, a comma list or a list)."""
    items = [value] if isinstance(value, str) else list(value or [])
    return [p.strip() for item in items for p in str(item).split(",") if p.strip()]


def check_data(cfg: Any) -> None:
    """The data files the composed config names exist and fit the rl schema (remote ones are verl's)."""
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


def setting_overrides(args: argparse.Namespace, cls: type = E2CSettings) -> dict[str, str]:
    """The Hydra overrides of the E2C flags given (a flag at its default leaves the config's value):
    ``--explore-adv-coef 2`` -> ``{"e2c.explore_adv_coef": "2.0"}``."""
    out = {}
    for f in setting_flags(cls):
        value = getattr(args, f.dest)
        if value != f.default:
            out[f.hydra_key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


@dataclass(frozen=True)
class LaunchSettings:
    """The launcher's own flags: which algorithm and stages, where it reads and writes, how the run is set up
    (the E2C flags are :class:`~e2c.rl.settings.E2CSettings`, the LoRA flags :class:`~e2c.launch.lora.LoraSettings`).
    Each field is its flag, declared here once; the parsed flags keep the fields' names."""

    algo: str = field(
        default="grpo", metadata=setting("grpo (paper) or dapo (default grpo)", flag="--algo", choices=ALGOS)
    )
    stage: str = field(
        default="both",
        metadata=setting(
            "1: warm-up, 2: weighted, both: 1 then 2 from 1's last checkpoint, as the paper's script "
            "(default both)",
            flag="--stage",
            choices=STAGE_CHOICES,
        ),
    )
    model: str | None = field(
        default=None,
        metadata=setting(
            "stage 1 (and both): tiny|embedded|folder|HF id (default models/checkpoints/sft/final); "
            "--stage 2: default is stage 1's latest checkpoint",
            flag="--model",
            value=MODEL,
        ),
    )
    stage1_dir: str | None = field(
        default=None,
        metadata=setting(
            "--stage 2: stage 1's run folder to start from (default <root>/stage1-warmup; not with --model)",
            flag="--stage1-dir",
            value=TEXT,  # a missing folder is told what to run first (latest_hf_checkpoint), not only refused
        ),
    )
    root_dir: str | None = field(
        default=None,
        metadata=setting(
            "parent of the stage folders stage1-warmup/ and stage2-main/ (the scripts' OUTPUT_DIR; default "
            "models/checkpoints/rl, DAPO: models/checkpoints/rl/dapo)",
            flag="--root-dir",
            value=OUTPUT_DIR,
        ),
    )
    train_data: str | None = field(
        default=None,
        metadata=setting(
            "RL parquet(s), comma-separated (default: the config's)", flag="--train-data", value=DATA_FILES
        ),
    )
    val_data: str | None = field(
        default=None,
        metadata=setting(
            "validation parquet(s) (default: the config's)", flag="--val-data", value=DATA_FILES
        ),
    )
    output_dir: str | None = field(
        default=None,
        metadata=setting(
            "one stage's run folder, exactly (--stage 1 or 2 only; default <root>/stage1-warmup or "
            "<root>/stage2-main)",
            flag="--output-dir",
            value=OUTPUT_DIR,
        ),
    )
    steps: int | None = field(
        default=None,
        metadata=setting(
            "train exactly this many steps, at least 1: the epochs are raised to give them (verl stops at the "
            "end of trainer.total_epochs even when more steps are asked for) (default: the config's epochs)",
            flag="--steps",
            value=whole(1),
        ),
    )
    save_freq: int | None = field(
        default=None,
        metadata=setting(
            "checkpoint every N steps and at the last (default: the config's; where that is -1, the last "
            "step only, so final/ exists); -1: never (--stage 1 or 2 only)",
            flag="--save-freq",
            value=whole(1, special=(-1, 0), meaning="-1 or 0: never"),
        ),
    )
    dr_grpo: bool = field(
        default=False,
        metadata=setting(
            "Dr. GRPO's advantage: subtract the group's mean reward, do not divide by its std (verl's "
            "algorithm.norm_adv_by_std_in_grpo=false); with the std, one small penalty in an otherwise equal "
            "group becomes a full-size advantage. The loss stays token-mean (Dr. GRPO's constant normaliser: "
            "-- actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm). Default: off (the paper's GRPO)",
            flag="--dr-grpo",
        ),
    )
    # -- code rows: where their programs run, how they are rewarded ---------------------------------------
    sandbox: str | None = field(
        default=None,
        metadata=setting(
            f"{SANDBOX_HELP}; a SandboxFusion server must answer before training starts",
            flag="--sandbox",
            value=TEXT,  # checked by e2c.sandbox.parse_spec in parse_args, then exported to every ray worker
        ),
    )
    code_reward: str | None = field(
        default=None,
        metadata=setting(
            "reward of a code answer: all (1 when every test passes) or fraction (the share of tests passed, "
            "as verl's prime_code); default: each row's extra_info.code_reward, else all",
            flag="--code-reward",
            choices=CODE_REWARDS,
        ),
    )
    nnodes: int | None = field(
        default=None, metadata=setting("nodes (default $NNODES or 1)", flag="--nnodes", value=NODES)
    )
    logger: str = field(default=DEFAULT_LOGGERS, metadata=setting(LOGGER_HELP, flag="--logger", value=TEXT))
    val_generations: int = field(
        default=VAL_GENERATIONS,
        metadata=setting(
            "validation chains logged to the trackers as text, with reward and parse status; every "
            f"validation generation also goes to OUTPUT_DIR/{VAL_DIR}/<step>.jsonl (default: {VAL_GENERATIONS}; "
            "0: neither)",
            flag="--val-generations",
            value=whole(0),
        ),
    )
    memory_check: bool = field(
        default=True,
        metadata=setting(
            "start a CPU run even when its memory estimate (e2c/rl/memory.py) is over what this machine can "
            "give it (also E2C_MEMORY_CHECK=0); default: refuse it before verl starts",
            flag="--no-memory-check",
            negate=True,
        ),
    )
    dry_run: bool = field(
        default=False, metadata=setting("print the verl command and exit", flag="--dry-run")
    )
    force: bool = field(default=False, metadata=setting(FORCE_HELP, flag="--force"))
    overrides: tuple[str, ...] = field(
        default=(),
        metadata=setting("Hydra overrides, e.g. trainer.total_epochs=3", flag="overrides", nargs="*"),
    )


def build_parser() -> ArgumentParser:
    """The launcher's command line: its own flags (:class:`LaunchSettings`), the E2C flags (:data:`SETTINGS`)
    and the LoRA flags, each declared once in its dataclass; then Hydra's overrides."""
    p = ArgumentParser(
        prog="e2c_rl",
        description="E2C RL on verl (GRPO or DAPO, stage 1 or 2). Overrides after -- go to Hydra.",
    )
    add_setting_flags(p, LaunchSettings)
    add_setting_flags(p, SETTINGS, group=GROUP)
    add_lora_args(p)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    args.stages = STAGES if args.stage == "both" else (int(args.stage),)
    if args.nnodes is None:
        args.nnodes = env_count("NNODES", NODES, 1)
    check_numbers(args)
    args.sandbox = sandbox_setting(args.sandbox)
    args.sandbox_workers = sandbox_workers_setting()
    tracker_names(args.logger)  # an unknown tracker is one line before anything starts
    lora_overrides(args, MODEL_KEY)
    return args


def sandbox_workers_setting(env: Mapping[str, str] | None = None) -> int | None:
    """``$E2C_SANDBOX_WORKERS`` (programs at once per reward worker) when set, checked here rather than
    inside a ray worker; None when unset."""
    value = (os.environ if env is None else env).get(WORKERS_ENV)
    return workers_setting(value) if value else None


def sandbox_env(args: argparse.Namespace) -> dict[str, str]:
    """What the ray workers need to build the same sandbox (their reward managers run the programs):
    ``$E2C_SANDBOX`` and ``$E2C_SANDBOX_WORKERS`` when set. Not part of the run's identity: where programs
    run does not change what a run is (a resumed run may move to another server)."""
    out = {}
    if args.sandbox is not None:
        out[SANDBOX_ENV] = str(args.sandbox)
    if args.sandbox_workers is not None:
        out[WORKERS_ENV] = str(args.sandbox_workers)
    return out


def check_sandbox(spec: SandboxSpec | None) -> None:
    """The sandbox the run's reward workers will use (``--sandbox``, ``$E2C_SANDBOX``, else local) runs
    ``print(1)`` before training starts (:func:`e2c.sandbox.ready`, about 25 ms locally): a server that does
    not answer, or a local sandbox this machine cannot build, is one line here, not a reward of errors once
    ray runs. Checked whatever the data (a code row may come from any file)."""
    ready(spec)


def check_overlong(cfg: Any) -> None:
    """An enabled overlong penalty's buffer fits the response length (``e2c.rewards.shape.overlong_problem``): one
    line here, naming what to change, not a reward worker that dies inside ray."""
    from omegaconf import OmegaConf

    kwargs = OmegaConf.to_container(cfg.reward.get("reward_kwargs", None) or {}, resolve=True)
    if why := overlong_problem(kwargs):
        raise UserError(
            f"{why}: lower reward.reward_kwargs.overlong_buffer_cfg.len or raise data.max_response_length"
        )


def check_code_reward(cfg: Any) -> None:
    """The composed config's code reward (``--code-reward`` or a Hydra override of its key) is one verl's
    reward workers accept: one line here, not a ValueError in every reward worker."""
    from omegaconf import OmegaConf

    try:
        code_reward_mode(OmegaConf.select(cfg, CODE_REWARD_KEY), CODE_REWARD_KEY)
    except ValueError as e:
        raise UserError(str(e)) from None


def check_numbers(args: argparse.Namespace) -> None:
    """Flags that contradict each other (each flag's own values are checked by its type, e2c.commandline.argtypes)."""
    if args.stage1_dir and args.stages != (2,):
        raise UserError(
            "--stage1-dir is the start of --stage 2 alone; stage 1 (and both stages) start from --model "
            "(MODEL_PATH)"
        )
    if args.output_dir and len(args.stages) > 1:
        raise UserError(
            f"--output-dir {args.output_dir} names one stage's folder; both stages run here: pass --root-dir "
            "(OUTPUT_DIR), the parent of stage1-warmup/ and stage2-main/, or --stage 1 or 2"
        )
    if len(args.stages) > 1 and user_save_freq(args) == -1:
        raise UserError(
            "a save frequency of -1 saves no checkpoint, so stage 2 would have nothing to start from; "
            "run --stage 1 alone or drop it"
        )
    if args.stage1_dir and args.model:
        raise UserError(
            f"--stage1-dir {args.stage1_dir} and --model (MODEL_PATH) {args.model} both pick stage 2's start "
            "model; pass one of them"
        )


def user_save_freq(args: argparse.Namespace) -> int | None:
    """The save frequency the user gave (``--save-freq`` or a ``trainer.save_freq=`` override, the last
    winning), or None; anything at most 0 reads as -1 (never)."""
    value: Any = args.save_freq
    for o in args.overrides:
        key, _, v = o.partition("=")
        if key.lstrip("+~") == SAVE_FREQ_KEY:
            value = v
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        return None  # not a number: Hydra's check names it
    return n if n > 0 else -1


def root_dir(args: argparse.Namespace) -> Path:
    """The parent of the stage folders (``--root-dir``, else the algorithm's default); a file there is
    refused in one line naming the variable users set."""
    root = Path(args.root_dir).expanduser().resolve() if args.root_dir else default_root(args.algo)
    if root.exists() and not root.is_dir():
        raise UserError(f"--root-dir (OUTPUT_DIR) {root} exists and is not a folder")
    return root


def stage1_dir(args: argparse.Namespace) -> Path:
    """Where stage 2 looks for stage 1's checkpoints."""
    if args.stage1_dir:
        return Path(args.stage1_dir).expanduser().resolve()
    return default_output_dir(args.algo, 1, root_dir(args))


def command(args: argparse.Namespace, stage: int | None = None, start: str | None = None) -> list[str]:
    """Resolve everything for one stage and return the verl command line (raises UserError on bad input).

    ``stage`` defaults to the only one asked for; ``start`` names stage 2's start model without checking
    it (both stages: stage 1's checkpoint does not exist yet when the command is checked up front)."""
    stage = stage or args.stages[0]
    args.stage = stage
    # Stage 2's planned start (both stages) does not exist yet: the memory estimate reads stage 1's model.
    shape_folder = getattr(args, "model_path", None)
    gpus = gpu_count()
    if gpus == 0:
        # Read inside the CPU rollout's ray actor, where a bad value would end in a traceback: check it here.
        try:
            rollout_engine()
            rollout_dtype()
            sync_via()
        except ValueError as e:
            raise UserError(str(e)) from None
    else:
        gpus = requested_gpus(gpus)
    args.gpus = gpus
    args.output_dir = (
        Path(args.output_dir).expanduser().resolve()
        if args.output_dir and len(args.stages) == 1
        else default_output_dir(args.algo, stage, root_dir(args))
    )
    if start is not None:
        args.model_path = start
        started = f"stage 1 in {stage1_dir(args)}"
    elif stage == 2 and (args.model is None or len(args.stages) > 1):
        started = f"stage 1 in {stage1_dir(args)}"
        args.model_path = str(latest_hf_checkpoint(stage1_dir(args)))
        check_policy_folder(Path(args.model_path))  # a checkpoint cut short by a kill
        print(f"[e2c-rl] stage 2 starts from stage 1's checkpoint {args.model_path}", flush=True)
    else:
        spec = args.model or str(default_sft_model())
        if args.model is None and not Path(spec).exists():
            raise UserError(
                f"no SFT model at {spec}; run bash scripts/e2c_sft.sh first or pass --model (tiny|embedded|folder)"
            )
        args.model_path = resolve_model_path(spec)
        started = local_paths([spec])[0]
    synthetic_fallback(args)
    for attr in ("train_data", "val_data"):
        if getattr(args, attr):  # verl runs in the repository: relative paths are the caller's
            files = [
                str(Path(f).expanduser().resolve()) if "://" not in f else f
                for f in data_files(getattr(args, attr))
            ]
            setattr(args, attr, ",".join(files))
    overrides = build_overrides(args, gpus)
    from omegaconf import OmegaConf

    cfg = compose_checked(
        configs_dir(), config_name(args.algo), [f"e2c_stage=stage{stage}", *overrides], args.overrides
    )
    check_data(cfg)
    check_code_reward(cfg)
    check_overlong(cfg)
    epochs = epochs_for_steps(cfg, args.steps)
    total = cfg.trainer.get("total_training_steps")
    args.total_steps = int(total) if total is not None else None  # None: verl counts the epochs' batches
    # An unknown or mistyped e2c.* key, a value outside its type (nan, a negative budget), an unregistered
    # e2c.explore_adv_rule or chain format stops here, not inside a ray worker.
    settings = e2c_settings(cfg, SETTINGS)
    check_algorithm(cfg, settings, args.algo, stage)
    # Every size and count is a whole number >= 1 (compose_checked: e2c.launch.checks.VERL_FIELDS), so the
    # CPU preset's micro-batches can be fitted to the batch.
    if gpus == 0:
        named = {o.partition("=")[0].lstrip("+~") for o in args.overrides}
        fitted = cpu_micro_batches(cfg, named)
        overrides.extend(f"{k}={v}" for k, v in fitted.items())
        for key, value in fitted.items():
            OmegaConf.update(cfg, key, int(value))
    check_shape(cfg, args, stage)
    # verl's own dataclasses and validators, as main_ppo runs them inside its ray driver: one line here.
    verl_rl_checks(cfg, shape_label(cfg, args, stage))
    if gpus == 0 and memory_checked(args):
        folder = args.model_path if (Path(args.model_path) / "config.json").is_file() else shape_folder
        check_memory(cfg, Path(folder or args.model_path), shape_label(cfg, args, stage))
    overrides.extend(f"{k}={v}" for k, v in on_policy_overrides(cfg, args.overrides).items())
    if user_save_freq(args) is None and int(cfg.trainer.save_freq) <= 0:
        # The CPU preset saves nothing; every stage still ends with a checkpoint, so final/ (and stage 2's
        # start) exist.
        overrides.append(f"{SAVE_FREQ_KEY}={LAST_STEP_ONLY}")
    check_output_dir(args.output_dir, "output folder")  # created when the stage starts (run_stage)
    args.run_folder = RunFolder(
        args.output_dir,
        f"rl-{args.algo}-stage{stage}",
        {
            "start_model": started,
            "train_data": args.train_data,
            "val_data": args.val_data,
            "settings": setting_overrides(args),
            "lora": lora_overrides(args, MODEL_KEY),
            "overrides": identity_overrides(args.overrides),
            # A launcher override (not in args.overrides): the reward, so the run's identity; --sandbox is not.
            **({"code_reward": args.code_reward} if args.code_reward is not None else {}),
        },
        force=args.force,
    )
    return [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        f"--config-path={configs_dir()}",
        f"--config-name={config_name(args.algo)}",
        f"e2c_stage=stage{stage}",
        *overrides,
        *args.overrides,
        # After the user's overrides: --steps is the number of steps run, whatever the epochs say.
        *([f"trainer.total_epochs={epochs}"] if epochs is not None else []),
    ]


LOSS_MODE_KEY = "actor_rollout_ref.actor.policy_loss.loss_mode"


def on_policy_overrides(cfg: Any, user_overrides: list[str]) -> dict[str, str]:
    """``{loss_mode: e2c_on_policy}`` where the update is exactly on-policy, else ``{}``.

    With one PPO epoch over one mini-batch (``ppo_mini_batch_size == data.train_batch_size``) the policy
    being updated is the one that sampled, so the PPO ratio is 1 and verl's separate old-log-prob forward
    pass recomputes what the update's own forward computes (11-13 s of a ~72 s CPU step). The
    ``e2c_on_policy`` loss (:func:`e2c.rl.trainer.on_policy_loss`) takes the update's log-probs, detached, as
    the old ones, and the trainer skips that pass. Not where anything else reads the old log-probs: several
    mini-batches or epochs, rollout correction (bypass, importance sampling or rejection), a KL penalty in
    the reward, or a loss the user chose (``loss_mode`` other than vanilla or named in the overrides). A
    user who names ``e2c_on_policy`` where the update is not on-policy is refused.
    """
    actor = cfg.actor_rollout_ref.actor
    mode = str(actor.policy_loss.get("loss_mode", "vanilla"))
    one_update = int(actor.ppo_epochs) == 1 and int(actor.ppo_mini_batch_size) == int(
        cfg.data.train_batch_size
    )
    if mode == ON_POLICY_LOSS and not one_update:
        raise UserError(
            f"{LOSS_MODE_KEY}={ON_POLICY_LOSS} is exact only with one PPO epoch over one mini-batch; this run "
            f"has ppo_epochs={actor.ppo_epochs} and ppo_mini_batch_size={actor.ppo_mini_batch_size} of "
            f"data.train_batch_size={cfg.data.train_batch_size}: use loss_mode=vanilla"
        )
    named = any(o.partition("=")[0].lstrip("+~") == LOSS_MODE_KEY for o in user_overrides)
    rc = cfg.algorithm.get("rollout_correction") or {}
    corrected = bool(rc.get("bypass_mode")) or rc.get("rollout_is") or rc.get("rollout_rs")
    kl_in_reward = bool(cfg.algorithm.get("use_kl_in_reward", False))
    if mode != "vanilla" or named or not one_update or corrected or kl_in_reward:
        return {}
    return {LOSS_MODE_KEY: ON_POLICY_LOSS}


def train_rows(cfg: Any) -> int | None:
    """Rows of the run's local training parquet files (None when one is remote or not a parquet)."""
    import pyarrow.parquet as pq

    total = 0
    for f in data_files(cfg.data.get("train_files")):
        path = Path(f).expanduser()
        path = path if path.is_absolute() else project_root() / path
        if "://" in f or path.suffix != ".parquet":
            return None
        total += pq.ParquetFile(path).metadata.num_rows
    return total


def epochs_for_steps(cfg: Any, steps: int | None) -> int | None:
    """The ``trainer.total_epochs`` that lets verl run ``steps`` steps (None: ``--steps`` not given).

    verl's loop ends at the end of the last epoch even when ``total_training_steps`` asks for more, and an
    epoch is ``rows // data.train_batch_size`` steps (its loader drops the last partial batch): with 15
    prompts, batch 4 and 2 epochs, ``--steps 45`` would stop at step 6. A data file too small for one step
    is refused here.

    >>> from omegaconf import OmegaConf
    >>> epochs_for_steps(OmegaConf.create({"data": {"train_files": [], "train_batch_size": 4}}), None) is None
    True
    """
    if steps is None:
        return None
    rows = train_rows(cfg)
    batch = int(cfg.data.train_batch_size)
    if rows is None:  # a remote file: its rows are unknown here; enough epochs for any size
        return steps
    per_epoch = rows // batch
    if per_epoch == 0:
        raise UserError(
            f"--steps {steps}: the training data has {rows} prompt(s), fewer than one batch "
            f"(data.train_batch_size={batch}), so no step can run; give more prompts or a smaller batch"
        )
    return math.ceil(steps / per_epoch)


# The script that runs each algorithm (what a contradicting override is told to use instead).
SCRIPTS = {"grpo": "scripts/e2c_rl.sh", "dapo": "scripts/e2c_dapo.sh"}
# verl's advantage estimator in both configs: known without importing verl.
CONFIG_ADV_ESTIMATOR = "grpo"


def check_algorithm(cfg: Any, settings: E2CSettings, algo: str, stage: int) -> None:
    """The composed config runs what the command says: ``e2c.algo`` and ``e2c.stage`` agree with ``--algo``
    (the script) and ``--stage`` (an override that contradicts them would mix one algorithm's settings with
    another's name and folders), and ``algorithm.adv_estimator`` is one verl has registered (verl looks it up
    only when the first batch is scored, minutes in)."""
    if settings.algo != algo:
        raise UserError(
            f"e2c.algo={settings.algo} contradicts --algo {algo} ({SCRIPTS[algo]} runs {algo}); drop the "
            f"override, or run {SCRIPTS[settings.algo]} for {settings.algo}"
        )
    if settings.stage != stage:
        raise UserError(
            f"e2c.stage={settings.stage} contradicts --stage {stage}; pick the stage with --stage (its "
            "settings come from configs/e2c_stage/)"
        )
    from omegaconf import OmegaConf

    estimator = OmegaConf.select(cfg, "algorithm.adv_estimator", default=CONFIG_ADV_ESTIMATOR)
    if estimator == CONFIG_ADV_ESTIMATOR:
        return
    known = adv_estimators()
    if str(estimator) not in known:
        near = closest_key(str(estimator), known)
        hint = f" (did you mean {near}?)" if near else ""
        raise UserError(
            f"unknown algorithm.adv_estimator {estimator!r}{hint}; verl's estimators: {', '.join(known)}"
        )


def adv_estimators() -> list[str]:
    """The advantage estimators verl has registered (``verl.trainer.ppo.core_algos``), with those of the
    verl plugins its import loads; its import prints warnings, which are kept off the terminal."""
    with _quiet_fds():
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    return sorted(ADV_ESTIMATOR_REGISTRY)


def check_shape(cfg: Any, args: argparse.Namespace, stage: int) -> None:
    """The batch arithmetic verl asserts only inside its workers, at this run's ranks and nodes
    (:func:`e2c.launch.batch_shapes.check_rl`, the GPU recipe's own check): one line before ray starts."""

    cluster = Cluster(int(cfg.trainer.n_gpus_per_node), int(cfg.trainer.nnodes))
    check_rl(cfg, shape_label(cfg, args, stage), cluster)


def memory_checked(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> bool:
    """Whether this launch checks its memory (:func:`check_memory`): not with ``--no-memory-check`` or
    ``E2C_MEMORY_CHECK=0``, not for ``--dry-run`` (it runs nothing), and not when the driver joins a ray
    cluster (``RAY_ADDRESS``: the workers run on its machines, not this one)."""
    env = os.environ if env is None else env
    if getattr(args, "no_memory_check", False) or getattr(args, "dry_run", False) or env.get("RAY_ADDRESS"):
        return False
    return not check_disabled(env)


def check_memory(cfg: Any, model_folder: Path, label: str) -> None:
    """A CPU run that cannot fit in this machine's memory is one line here (the estimate, what this machine
    can give it, what to change: :mod:`e2c.rl.memory`), not ray's memory monitor killing a worker minutes
    in; one that fits says its estimate. GPU runs are not checked (:mod:`e2c.rl.memory`)."""
    model = memory.model_shape(model_folder)
    if model is None:
        print(f"[e2c-rl] memory not estimated: {model_folder}/config.json does not give the model's shape")
        return
    engine, weight_bytes = memory.cpu_rollout()
    plan = memory.plan_from_config(cfg, engine, weight_bytes)
    limit = memory.machine_limit()
    changes = memory.launcher_changes(plan, cfg.data.train_batch_size, cfg.actor_rollout_ref.rollout.n)
    est = memory.check_run(model, plan, f"{label}, {plan.samples} samples per step", changes, limit=limit)
    print(
        f"[e2c-rl] memory: about {est.total / memory.GIB:.1f} GiB ({est.parts()}) of the "
        f"{limit.bytes / memory.GIB:.1f} GiB {limit.source} can give a run",
        flush=True,
    )


def shape_label(cfg: Any, args: argparse.Namespace, stage: int) -> str:
    """How an error line names the run: ``GRPO stage 1 at 1x1 GPUs``."""
    cluster = Cluster(int(cfg.trainer.n_gpus_per_node), int(cfg.trainer.nnodes))
    return stage_label(f"rl{stage}", args.algo, cluster)


def synthetic_fallback(args: argparse.Namespace) -> None:
    """No RL data named and the paper's processed RL files absent (an offline machine): train and validate
    on the synthetic RL prompts ``prepare_all_data.sh --skip-download`` writes, as SFT falls back to the
    synthetic SFT set, and say so in one line."""
    named = {o.partition("=")[0].lstrip("+~") for o in args.overrides}
    processed = project_root() / "data" / "processed" / "rl"
    synthetic = processed / "synthetic_rl.parquet"
    if not synthetic.is_file():
        return
    for attr, key, paper in (
        ("train_data", "data.train_files", "e2c_rl_train.parquet"),
        ("val_data", "data.val_files", "e2c_rl_val.parquet"),
    ):
        if not getattr(args, attr) and key not in named and not (processed / paper).is_file():
            setattr(args, attr, str(synthetic))
            if not getattr(args, "_said_synthetic", False):
                print(
                    f"[e2c-rl] no {processed / paper}: the synthetic RL prompts {synthetic} are used",
                    flush=True,
                )
                args._said_synthetic = True


def stage_env(gpus: int, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of verl's driver. On a CPU run (``gpus`` 0) ray gets logical GPUs (one per CPU rank),
    which it refuses to start with when ``CUDA_VISIBLE_DEVICES`` is set and lists none (``CUDA_VISIBLE_DEVICES=``,
    a common way to say "no GPU"): the launcher has already read that, so the variable is left out, and
    ``E2C_FORCE_CPU=1`` keeps every process on the CPU platform, as the SFT launcher does.

    >>> sorted(k for k in stage_env(0, {"CUDA_VISIBLE_DEVICES": ""}) if "CUDA" in k or "CPU" in k)
    ['E2C_FORCE_CPU']
    >>> stage_env(0, {"E2C_FORCE_CPU": ""})["E2C_FORCE_CPU"]
    '1'
    >>> stage_env(2, {"CUDA_VISIBLE_DEVICES": "0,1"})["CUDA_VISIBLE_DEVICES"]
    '0,1'
    """
    out = dict(os.environ if env is None else env)
    out.setdefault("HYDRA_FULL_ERROR", "1")
    out.setdefault("RAY_DEDUP_LOGS", "0")
    if gpus == 0:
        out["E2C_FORCE_CPU"] = "1"
        visible = out.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            ids = [d.strip() for d in visible.split(",") if d.strip()]
            if not ids or ids[0] == "-1":
                del out["CUDA_VISIBLE_DEVICES"]
    return out


def run_stage(args: argparse.Namespace, cmd: list[str]) -> int:
    """Run one stage's verl command, holding its folder (:class:`e2c.core.run_folder.RunFolder`); keep its
    metrics, merge LoRA adapters and link ``final``."""
    ensure_output_dir(args.output_dir, "output folder")
    with args.run_folder.claim():
        return _run_stage(args, cmd)


RAY_TEMP_KEY = "ray_kwargs.ray_init._temp_dir"


def ray_temp_dir(overrides: list[str], env: Mapping[str, str] | None = None) -> Path | None:
    """A private temp folder for the ray verl starts (:func:`e2c.launch.cluster.private_ray_dir`); None when verl
    joins a cluster (``RAY_ADDRESS``: the cluster's folder is its own) or the user's overrides name one."""
    env = os.environ if env is None else env
    named = any(o.lstrip("+~").partition("=")[0] == RAY_TEMP_KEY for o in overrides)
    if env.get("RAY_ADDRESS") or named:
        return None
    return private_ray_dir()


def _run_stage(args: argparse.Namespace, cmd: list[str]) -> int:
    print(f"[e2c-rl] {args.algo} stage {args.stage} -> {args.output_dir}", flush=True)
    if args.gpus == 0 and not os.environ.get("RAY_ADDRESS"):
        print(f"[e2c-rl] {allocator_line()}", flush=True)
    keep_metrics(args.output_dir)
    ray_temp = ray_temp_dir(list(args.overrides or []))
    if ray_temp is not None:
        cmd = [*cmd, f"+{RAY_TEMP_KEY}={hydra_value(str(ray_temp))}"]
    rc = 1
    try:
        # A CPU run forks verl's driver from this process, which imported verl for its checks (e2c.launch.fork).
        if args.gpus == 0 and (why := fork_refusal()):
            print(
                f"[e2c-rl] verl's driver starts in a new interpreter, not forked from this one: {why}",
                flush=True,
            )
        total = getattr(args, "total_steps", None)
        step = trained_to(args.output_dir, total, cmd[3:])
        if step is not None and step not in step_metrics(args.output_dir):
            back = rewind_unlogged(args.output_dir, step)
            print(
                f"[e2c-rl] step {step}'s checkpoint has no metrics record (killed between the two): training "
                f"again from {f'step {back}' if back is not None else 'the start'} to log it",
                flush=True,
            )
            step = None
        if step is not None:  # killed after its last checkpoint: verl would train a step past the total
            print(
                f"[e2c-rl] {args.output_dir} holds step {step} of {total}: nothing left to train",
                flush=True,
            )
            rc = 0
        else:
            rc = run_module(
                cmd[2],
                cmd[3:],
                project_root(),
                stage_env(args.gpus),
                fork=args.gpus == 0,
                cleanups=[stop_ray],
            )
    finally:
        restore_metrics(args.output_dir)
        plain_checkpoints(args.output_dir)
        if ray_temp is not None and rc == 0:
            remove_private_ray_dir(ray_temp)
        elif ray_temp is not None:
            print(f"[e2c-rl] ray's logs (private to this user): {ray_temp}/session_latest/logs", flush=True)
    final = link_final(args.output_dir)
    if final is not None:
        print(f"[e2c-rl] stage {args.stage}'s model: {final} -> {final.resolve()}", flush=True)
    return rc


def stop_ray() -> None:
    """Shut down the ray this process started (what ray's own exit handler does; a forked driver has not got it,
    :mod:`e2c.launch.fork`)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.dry_run and gpu_count() == 0:
        # A CPU run's driver is forked from this process (run_stage): the variables it adds are set here before
        # anything imports ray or verl (ray reads RAY_DEDUP_LOGS as it is imported). One it removes (an empty
        # CUDA_VISIBLE_DEVICES, which keeps this process's torch off any GPU) the child removes as it starts.
        os.environ.update(stage_env(0))
    if note := cpu_note("configs/cpu/rl.yaml"):
        print(f"[e2c-rl] {note}", flush=True)
    both = len(args.stages) > 1
    first = command(args)
    # Both stages: check stage 2's configuration now, with the start model it will have.
    planned = f"{stage1_dir(args)}/global_step_LATEST/actor/huggingface"
    later = argparse.Namespace(**vars(args))
    second = command(later, 2, start=planned) if both else None
    if not args.dry_run:
        for run in (args.run_folder, later.run_folder if both else None):
            if run is not None:
                run.check()
    check_sandbox(args.sandbox)
    checks_done()
    if args.dry_run:
        for cmd in (first, second):
            if cmd is not None:
                print(shlex.join(cmd))  # quoted: ${now:...} and [a,b] survive a paste into a shell
        return 0
    # A SIGTERM to this launcher alone stops verl's driver too (e2c.launch.fork.stop_child), releases the run's lock
    # and names the command that resumes (e2c.commandline.entry); its default action would leave the driver running.
    interrupt_on_sigterm()
    rc = run_stage(args, first)
    if rc != 0 or not both:
        return rc
    return run_stage(args, command(args, 2))


if __name__ == "__main__":
    run_main(main)
