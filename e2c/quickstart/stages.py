"""The quickstart's stages. Each takes the run :class:`Context` and a progress :class:`Reporter`, writes under
its own folder, and returns what goes into its ``DONE.json`` (outputs, commands, a few facts).

The stages call the toolkit's own entry points as subprocesses (``python -m e2c.eval.run``,
``scripts/e2c_sft.sh``, ``scripts/e2c_rl.sh``, ``python -m e2c.tts``), exactly as a user would.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.models import resolve_model
from e2c.core.paths import project_root
from e2c.data.bands import format_histogram
from e2c.launch.checkpoints import step_metrics
from e2c.launch.devices import gpu_count
from e2c.quickstart.config import RL_SAVE_EVERY, SFT_SAVE_EVERY, Config, resolve_dtype

# quickstart/trained.py imports Context and read_done from this module too.
from e2c.quickstart.context import Context, read_done, rel, shell_line
from e2c.quickstart.data import write_rl_pool
from e2c.quickstart.progress import Reporter, child_env, eval_parser, run_logged, step_parser, tts_parser
from e2c.rewards.shape import reward_shape
from e2c.rl import memory
from e2c.rl.launch import latest_hf_checkpoint, planned_cpu_config
from e2c.rl.passrate.config import PassRateFiles
from e2c.sft.metrics import read_losses


# ------------------------------------------------------------------------------------------------ eval
def eval_datasets(ctx: Context) -> dict[str, int]:
    """``{dataset: problems}`` the evaluation stages run, from the data stage's counts."""
    counts = json.loads((ctx.data_dir / "counts.json").read_text())
    out = {"synthetic": counts["splits"]["eval"]}
    if counts["gsm8k"]["problems"] and (ctx.eval_dir / "gsm8k.jsonl").is_file():
        out["gsm8k"] = counts["gsm8k"]["problems"]
    return out


def sampling_flags(ctx: Context, sampled: bool) -> list[str]:
    """The eval runner's flags of one protocol: greedy (one sample at T 0), or with ``sampled`` the paper's
    (``eval_samples`` samples per problem at ``eval_temperature``, top-p 1; its Pass@1 is avg@k)."""
    cfg = ctx.cfg
    samples, temperature = (cfg.eval_samples, cfg.eval_temperature) if sampled else (1, 0.0)
    return [
        "--sample",
        str(samples),
        "--temperature",
        f"{temperature:g}",
        *(["--top-p", "1.0"] if sampled else []),
    ]


def eval_command(
    ctx: Context,
    model: str,
    save: Path,
    datasets: Sequence[str],
    sampled: bool = False,
    then_sampled: Path | None = None,
) -> list[str]:
    """``python -m e2c.eval.run`` on the quickstart's eval folder (no hub): greedy, one sample; with
    ``sampled``, the paper's protocol (:func:`sampling_flags`), seeded by the run's seed, so every model
    draws with the same seeds. ``then_sampled``: after the greedy run, the sampled one into that folder, in
    the same process (``--then``: the model loads once)."""
    cfg = ctx.cfg
    return [
        sys.executable,
        "-m",
        "e2c.eval.run",
        "--model",
        model,
        "--dataset",
        ",".join(datasets),
        "--data-dir",
        str(ctx.eval_dir),
        "--no-hub",
        *sampling_flags(ctx, sampled),
        "--max-tokens",
        str(cfg.eval_max_tokens),
        "--seed",
        str(cfg.seed),
        "--output-dir",
        str(save),
        "--backend",
        cfg.backend,
        "--batch-size",
        str(cfg.eval_batch),
        "--dtype",
        resolve_dtype(cfg.dtype),
        *(
            ["--then", *sampling_flags(ctx, True), "--output-dir", str(then_sampled)]
            if then_sampled is not None
            else []
        ),
    ]


SAMPLED = "sampled"  # the sub-folder of an evaluation stage with its sampled (avg@k) run


def sampled_dir(stage_dir: Path) -> Path:
    """The folder of a stage's sampled evaluation (the paper's protocol), beside its greedy one."""
    return stage_dir / SAMPLED


def run_eval_stage(
    ctx: Context, rep: Reporter, stage: str, model: str, sampled: bool = True
) -> dict[str, Any]:
    """Evaluate ``model`` into ``<out>/<stage>/`` (the eval runner's run folder: predictions, results.json)
    greedily, then, with ``sampled`` and ``eval_samples`` > 0, the paper's way into ``<stage>/sampled/``:
    one command, so the model loads once."""
    datasets = eval_datasets(ctx)
    save = ctx.dir(stage)
    runs = [(save, False)]
    if sampled and ctx.cfg.eval_samples > 0:
        runs.append((sampled_dir(save), True))
    then = runs[1][0] if len(runs) > 1 else None
    cmd = eval_command(ctx, model, save, list(datasets), then_sampled=then)
    how = "greedy" + (
        f", then {ctx.cfg.eval_samples} samples at T {ctx.cfg.eval_temperature:g}" if then is not None else ""
    )
    rep.say(f"evaluating {model} ({how}) on {', '.join(f'{k} ({v})' for k, v in datasets.items())}")
    run_logged(cmd, save / "log.txt", rep, eval_parser(datasets, passes=len(runs)), child_env())
    outputs = {}
    for folder, is_sampled in runs:
        results = json.loads((folder / "results.json").read_text())
        acc = ", ".join(
            f"{k} {100 * m['pass@1']:.1f}% (format {100 * m['format_rate']:.0f}%)"
            for k, m in results["datasets"].items()
        )
        rep.say(f"{'avg@' + str(ctx.cfg.eval_samples) if is_sampled else 'greedy accuracy'} {acc}", 1.0)
        prefix = "sampled_" if is_sampled else ""
        outputs[f"{prefix}results"] = rel(folder / "results.json", ctx.out)
        for k in datasets:
            outputs[f"{prefix}predictions_{k}"] = rel(folder / "predictions" / f"{k}.jsonl", ctx.out)
    return {"outputs": outputs, "model": model, "commands": [shell_line(cmd)]}


def stage_baseline(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """The untrained model on the held-out problems, greedily (it writes no chains: 0% well-formed, so its
    sampled accuracy is not worth the minutes)."""
    return run_eval_stage(ctx, rep, "baseline", ctx.cfg.model, sampled=False)


def sft_model(ctx: Context) -> Path:
    return ctx.dir("sft") / "final"


def rl_model(ctx: Context) -> Path | None:
    """The RL model (HF folder of the run's latest checkpoint), or None when RL was skipped (0 steps)."""
    done = read_done(ctx.dir("rl"))
    if done is not None and done.get("skipped"):
        return None
    return latest_hf_checkpoint(ctx.dir("rl"))


def stage_eval_sft(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """The SFT model on the same problems with the same settings."""
    return run_eval_stage(ctx, rep, "eval_sft", str(sft_model(ctx)))


def stage_eval_rl(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """The RL model on the same problems with the same settings (skipped when RL was)."""
    model = rl_model(ctx)
    if model is None:
        rep.say("skipped: RL was skipped (--rl-steps 0)", 1.0)
        return {"skipped": True, "outputs": {}, "commands": []}
    return run_eval_stage(ctx, rep, "eval_rl", str(model))


# ------------------------------------------------------------------------------------------------ SFT
def sft_overrides(cfg: Config, steps: int | None = None, seed: int | None = None) -> list[str]:
    """Hydra overrides of verl's SFT trainer for the quickstart's SFT settings; ``steps`` (default
    ``cfg.sft_steps``) sets the checkpoint interval, ``seed`` (default ``cfg.seed``) the data order."""
    steps = cfg.sft_steps if steps is None else steps
    seed = cfg.seed if seed is None else seed
    return [
        f"optim.lr={cfg.sft_lr:g}",
        f"data.max_length={cfg.sft_max_length}",
        f"data.max_token_len_per_gpu={max(16384, cfg.sft_max_length)}",
        f"data.train_batch_size={cfg.sft_batch}",
        f"data.micro_batch_size_per_gpu={min(4, cfg.sft_batch)}",
        f"trainer.save_freq={min(SFT_SAVE_EVERY, steps)}",
        f"trainer.seed={seed}",
    ]


def stage_sft(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """E2C SFT through ``scripts/e2c_sft.sh`` (verl's SFT trainer); the model lands in ``sft/final``."""
    cfg, d = ctx.cfg, ctx.dir("sft")
    env = {
        "MODEL_PATH": cfg.model,
        "TRAIN_DATA": str(ctx.data_dir / "sft.parquet"),
        "VAL_DATA": "none",
        "OUTPUT_DIR": str(d),
        "TOTAL_TRAINING_STEPS": str(cfg.sft_steps),
    }
    cmd = ["bash", str(project_root() / "scripts" / "e2c_sft.sh"), *sft_overrides(cfg)]
    rep.say(f"training {cfg.model} for {cfg.sft_steps} steps x {cfg.sft_batch} chains, lr {cfg.sft_lr:g}")
    run_logged(cmd, d / "log.txt", rep, step_parser(cfg.sft_steps), child_env(env))
    final = sft_model(ctx)
    if not (final / "config.json").is_file():
        raise UserError(f"SFT finished but {final} holds no model; see {d / 'log.txt'}")
    losses = sft_losses(d)
    if losses:
        first, last = losses[min(losses)], losses[max(losses)]
        rep.say(f"loss {first:.3f} -> {last:.3f} over {len(losses)} steps", 1.0)
    return {
        "outputs": {"model": rel(final, ctx.out), "train_log": rel(d / "train.log", ctx.out)},
        "losses": {str(k): v for k, v in sorted(losses.items())},
        "commands": [shell_line(cmd, env)],
    }


def sft_losses(sft_dir: Path) -> dict[int, float]:
    """Training loss per step from the SFT run's ``metrics.jsonl`` (verl's file logger, every launch of a
    resumed run; a step logged again keeps its last value); ``final/e2c_sft.json`` as fallback."""
    losses = read_losses(sft_dir).train
    if not losses:
        meta = sft_dir / "final" / "e2c_sft.json"
        if meta.is_file():
            losses = {int(k): float(v) for k, v in json.loads(meta.read_text()).get("losses", {}).items()}
    return losses


# ------------------------------------------------------------------------------------------------ RL
def rl_overrides(cfg: Config) -> list[str]:
    """Hydra overrides (after ``--``) of the GRPO run for the quickstart's RL settings. Micro-batches are the
    launcher's: on CPU the preset's token budget (configs/cpu/rl.yaml), which bounds an update's memory at
    any samples per step (a fixed micro-batch of 16 sequences took 12 GiB)."""
    return [
        f"data.train_batch_size={cfg.rl_batch}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={cfg.rl_batch}",
        f"actor_rollout_ref.rollout.n={cfg.rl_n}",
        f"actor_rollout_ref.rollout.temperature={cfg.rl_temperature:g}",
        f"data.max_response_length={cfg.rl_response_length}",
        f"actor_rollout_ref.actor.optim.lr={cfg.rl_lr:g}",
        f"data.seed={cfg.seed}",
        # DAPO's overlong penalty (on in the E2C configs) starts this many tokens before the limit; 0: off.
        *(
            [f"reward.reward_kwargs.overlong_buffer_cfg.len={overlong_buffer(cfg)}"]
            if cfg.rl_overlong_buffer > 0
            else ["reward.reward_kwargs.overlong_buffer_cfg.enable=false"]
        ),
        # Stage 2's plan-adherence bonus (off by default here: see docs/quickstart.md, "The RL settings").
        f"reward.custom_reward_function.reward_kwargs.plan_bonus={str(cfg.rl_plan_bonus).lower()}",
        # How the chain's format enters the reward (e2c.rewards.shape): the three keywords of the named shape.
        *reward_shape_overrides(cfg.rl_reward_shape),
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        # Bypass mode takes the rollout's log-probs as the old ones. vLLM's bf16 kernels and the actor's bf16
        # autocast differ most where the margins are thin (the tag tokens), so the PPO ratio is off 1 there and
        # clipping cuts the positive updates but not the negative ones. Off by default (docs/results.md, "RL at
        # this scale": the tags collapsed in two runs with it); with one mini-batch and one epoch the launcher
        # skips the old-log-prob pass exactly instead (the e2c_on_policy loss, ratio 1).
        *(["algorithm.rollout_correction.bypass_mode=true"] if cfg.rl_bypass else []),
    ]


def rl_memory_check(cfg: Config) -> None:
    """Refuse, before any stage runs, an RL stage that cannot fit in this machine's memory: the run the RL
    stage will start (the CPU preset with :func:`rl_overrides`, composed as the launcher composes it) through
    the launcher's own check (:func:`e2c.rl.memory.check_run`), rather than ray's memory monitor ending it
    after the earlier stages. Not checked: RL skipped (``--rl-steps 0``), a GPU, ``E2C_MEMORY_CHECK=0``, a
    ray cluster (``RAY_ADDRESS``) and a model that is no folder here (an HF id: the launcher checks it when
    the stage starts)."""
    import os

    if cfg.rl_steps <= 0 or gpu_count() > 0 or memory.check_disabled() or os.environ.get("RAY_ADDRESS"):
        return
    folder = local_model_folder(cfg.model)
    model = memory.model_shape(folder) if folder is not None else None
    if model is None:
        return
    plan = planned_rl_run(tuple(rl_overrides(cfg)), os.environ.get("N_GPUS", ""))
    memory.check_run(
        model,
        plan,
        f"the RL stage ({cfg.rl_batch} prompts x {cfg.rl_n} samples per step)",
        [f"lower --rl-batch or --rl-n (now {cfg.rl_batch} x {cfg.rl_n})"],
        skip=f"set {memory.CHECK_ENV}=0 to run it anyway",
    )


@functools.lru_cache(maxsize=64)
def planned_rl_run(overrides: tuple[str, ...], ranks: str) -> Any:
    """The :class:`e2c.rl.memory.RunPlan` of the RL stage with these overrides, composed once per settings
    (the study checks every arm's settings; ``ranks``, ``$N_GPUS``, is part of the key)."""
    engine, weight_bytes = memory.cpu_rollout()
    return memory.plan_from_config(planned_cpu_config(list(overrides)), engine, weight_bytes)


def local_model_folder(spec: str) -> Path | None:
    """The folder of the quickstart's base model (the SFT model RL starts from has its shape): the tiny and
    embedded models (built into the cache if they are not there yet, as the data stage would) and a local
    folder; None for an HF id (not downloaded for a check)."""
    if spec in ("tiny", "embedded"):
        return Path(resolve_model(spec).path)
    path = Path(spec).expanduser()
    return path if path.is_dir() else None


def reward_shape_overrides(name: str) -> list[str]:
    """Hydra overrides setting the reward function's keywords of the named shape (:mod:`e2c.rewards.shape`).

    >>> reward_shape_overrides("gate")[0]
    'reward.custom_reward_function.reward_kwargs.require_format=true'
    """
    kwargs = reward_shape(name).reward_kwargs()
    return [
        f"reward.custom_reward_function.reward_kwargs.{k}={str(v).lower() if isinstance(v, bool) else f'{v:g}'}"
        for k, v in kwargs.items()
    ]


def overlong_buffer(cfg: Config) -> int:
    """The overlong penalty's buffer: ``rl_overlong_buffer`` tokens, at most half the response length (only
    used when ``rl_overlong_buffer`` > 0)."""
    return max(1, min(cfg.rl_overlong_buffer, cfg.rl_response_length // 2))


def rl_data(ctx: Context) -> Path:
    """The RL prompts: the pass-rate filter's output."""
    return ctx.dir("filter") / "rl.parquet"


# ------------------------------------------------------------------------------------------------ filter
def rl_pool_file(ctx: Context) -> Path:
    """The RL prompt pool the filter reads (written by the filter stage: its size and mix are its settings)."""
    return ctx.dir("filter") / "pool.parquet"


def filter_command(ctx: Context) -> list[str]:
    """``python -m e2c.rl.passrate`` on the data stage's RL prompts with the SFT model, sampling as the RL
    rollout does (its temperature and response length)."""
    cfg = ctx.cfg
    cmd = [
        sys.executable,
        "-m",
        "e2c.rl.passrate",
        "--model",
        str(sft_model(ctx)),
        "--input",
        str(rl_pool_file(ctx)),
        "--output",
        str(rl_data(ctx)),
        "--k",
        str(cfg.filter_k),
        "--band",
        cfg.filter_band,
        "--temperature",
        f"{cfg.rl_temperature:g}",
        "--max-tokens",
        str(cfg.rl_response_length),
        "--backend",
        cfg.backend,
        "--dtype",
        resolve_dtype(cfg.dtype),
        "--batch-size",
        str(cfg.eval_batch),
        "--seed",
        str(cfg.seed),
        # Graded with the RL run's reward (its shape and plan bonus), so "learnable" means what RL will see.
        "--reward-shape",
        cfg.rl_reward_shape,
        *(["--plan-bonus"] if cfg.rl_plan_bonus else []),
    ]
    if cfg.filter_candidates > 0:
        cmd += ["--limit", str(cfg.filter_candidates)]
    if cfg.rl_steps > 0:
        # Enough prompts for every step to draw new ones (verl ends RL at the end of its one epoch).
        cmd += ["--keep", str(rl_prompts_needed(cfg))]
    return cmd


def rl_prompts_needed(cfg: Config) -> int:
    """Prompts an RL run of ``cfg`` draws: one batch per step, none twice."""
    return cfg.rl_steps * cfg.rl_batch


def stage_filter(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """Keep the RL prompts whose pass rate under the SFT model is in the band (default strictly between 0
    and 1): a group of samples that all score the same gives GRPO no advantage, so such prompts only cost."""
    cfg, d = ctx.cfg, ctx.dir("filter")
    pool = write_rl_pool(ctx, rl_pool_file(ctx), rep)
    cmd = filter_command(ctx)
    rep.say(
        f"{cfg.filter_k} samples per RL prompt (up to {cfg.filter_candidates or 'all'} candidates, until "
        f"{rl_prompts_needed(cfg)} are kept) at T {cfg.rl_temperature:g}, band {cfg.filter_band}"
    )
    run_logged(cmd, d / "log.txt", rep, None, child_env())
    files = PassRateFiles.of(rl_data(ctx))
    report = json.loads(files.report.read_text())
    counts = [b["prompts"] for b in report["histogram"]]
    rep.say(
        f"kept {report['kept']} of {report['prompts']} prompts (correct of {cfg.filter_k}: "
        f"{format_histogram(counts)})",
        1.0,
    )
    return {
        "outputs": {
            "rl_data": rel(rl_data(ctx), ctx.out),
            "report": rel(files.report, ctx.out),
            "histogram": rel(files.plot, ctx.out),
        },
        "kept": report["kept"],
        "prompts": report["prompts"],
        "histogram": counts,
        "pool": pool,
        "mix": report.get("mix", {}),
        "commands": [shell_line(cmd)],
    }


def rl_command(
    ctx: Context, out_dir: Path, cfg: Config | None = None, extra: Sequence[str] = ()
) -> list[str]:
    """``scripts/e2c_rl.sh --stage 2`` from the SFT model on the filtered prompts into ``out_dir``, with the
    RL settings of ``cfg`` (default: the run's) and ``extra`` Hydra overrides last."""
    cfg = cfg or ctx.cfg
    data = str(rl_data(ctx))
    return [
        "bash",
        str(project_root() / "scripts" / "e2c_rl.sh"),
        "--stage",
        "2",
        "--model",
        str(sft_model(ctx)),
        "--train-data",
        data,
        "--val-data",
        data,
        "--output-dir",
        str(out_dir),
        "--steps",
        str(cfg.rl_steps),
        "--save-freq",
        str(min(RL_SAVE_EVERY, cfg.rl_steps)),
        "--explore-adv-coef",
        f"{cfg.rl_explore_adv_coef:g}",
        *(["--dr-grpo"] if cfg.rl_dr_grpo else []),
        "--health-stop-after",
        str(cfg.rl_health_stop_after),
        "--",
        *rl_overrides(cfg),
        *extra,
    ]


def stage_rl(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """GRPO stage 2 (exploration advantages weighted) through ``scripts/e2c_rl.sh`` from the SFT model."""
    cfg, d = ctx.cfg, ctx.dir("rl")
    if cfg.rl_steps <= 0:
        rep.say("skipped (--rl-steps 0)", 1.0)
        return {"skipped": True, "outputs": {}, "commands": []}
    cmd = rl_command(ctx, d)
    rep.say(f"GRPO stage 2: {cfg.rl_steps} steps x {cfg.rl_batch} prompts x {cfg.rl_n} samples")
    run_logged(cmd, d / "log.txt", rep, step_parser(cfg.rl_steps), child_env())
    model = rl_model(ctx)
    curve = rl_curve(d)
    if curve:
        rep.say(f"reward {curve[0]['reward']:.3f} -> {curve[-1]['reward']:.3f} over {len(curve)} steps", 1.0)
    return {
        "outputs": {
            "model": rel(model, ctx.out) if model else None,
            "metrics": rel(d / "metrics.jsonl", ctx.out),
        },
        "commands": [shell_line(cmd)],
    }


REWARD_KEYS = ("critic/score/mean", "critic/rewards/mean")
ACC_KEYS = ("health/train_acc", "reward_extra_info/acc/mean", "e2c/acc_mean", "critic/acc/mean")


def rl_curve(run_dir: Path) -> list[dict[str, Any]]:
    """Per step of the RL run's ``metrics.jsonl``: reward (verl's ``critic/score/mean``), accuracy and the
    E2C segment metrics when logged."""
    out = []
    for step, data in step_metrics(run_dir).items():
        reward = next((data[k] for k in REWARD_KEYS if k in data), None)
        if reward is None:
            continue
        row = {"step": step, "reward": float(reward)}
        acc = next((data[k] for k in ACC_KEYS if k in data), None)
        if acc is not None:
            row["accuracy"] = float(acc)
        for k in (
            "e2c/well_formed_share",
            "e2c/explore_tokens_mean",
            "e2c/execute_tokens_mean",
            "response_length/mean",
        ):
            if k in data:
                row[k] = float(data[k])
        out.append(row)
    return out


# ------------------------------------------------------------------------------------------------ control
def rl_trained_tokens(run_dir: Path, samples_per_step: int) -> int:
    """Response tokens the RL run trained on: per step, verl's ``response_length/mean`` times the samples of
    a step, summed over the logged steps."""
    rows = rl_curve(run_dir)
    return round(sum(r.get("response_length/mean", 0.0) for r in rows) * samples_per_step)


def control_steps(rl_tokens: int, chain_tokens: float, batch: int) -> int:
    """SFT steps of ``batch`` chains of ``chain_tokens`` trained tokens that train about ``rl_tokens``
    tokens (at least 1).

    >>> control_steps(38_400, 240, 8)
    20
    """
    return max(1, math.ceil(rl_tokens / max(chain_tokens * batch, 1.0)))


def control_model(ctx: Context) -> Path:
    return ctx.dir("control") / "final"


def stage_control(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """The equal-compute control: SFT from the same SFT model, on the SFT data, for as many trained tokens
    as the RL stage trained on (``--with-control``; skipped otherwise). An RL gain that this extra SFT also
    gets is not an RL gain."""
    cfg, d = ctx.cfg, ctx.dir("control")
    if not cfg.with_control:
        rep.say("skipped (add --with-control to run it)", 1.0)
        return {"skipped": True, "outputs": {}, "commands": []}
    if rl_model(ctx) is None:
        rep.say("skipped: RL was skipped (--rl-steps 0)", 1.0)
        return {"skipped": True, "outputs": {}, "commands": []}
    counts = json.loads((ctx.data_dir / "counts.json").read_text())
    # SFT trains on the assistant turn: the chain plus its four tags and the EOS.
    chain_tokens = float(counts["chain_tokens"]["median"]) + 5
    rl_tokens = rl_trained_tokens(ctx.dir("rl"), cfg.rl_batch * cfg.rl_n)
    steps = control_steps(rl_tokens, chain_tokens, cfg.sft_batch)
    env = {
        "MODEL_PATH": str(sft_model(ctx)),
        "TRAIN_DATA": str(ctx.data_dir / "sft.parquet"),
        "VAL_DATA": "none",
        "OUTPUT_DIR": str(d),
        "TOTAL_TRAINING_STEPS": str(steps),
    }
    # Another shuffle seed than the first SFT: mostly chains that SFT did not see.
    overrides = sft_overrides(cfg, steps=steps, seed=cfg.seed + 1)
    cmd = ["bash", str(project_root() / "scripts" / "e2c_sft.sh"), *overrides]
    rep.say(
        f"SFT from the SFT model for {steps} steps x {cfg.sft_batch} chains (~{rl_tokens} trained tokens, "
        "as the RL stage)"
    )
    run_logged(cmd, d / "log.txt", rep, step_parser(steps), child_env(env))
    final = control_model(ctx)
    if not (final / "config.json").is_file():
        raise UserError(f"the control SFT finished but {final} holds no model; see {d / 'log.txt'}")
    losses = sft_losses(d)
    return {
        "outputs": {"model": rel(final, ctx.out), "train_log": rel(d / "train.log", ctx.out)},
        "steps": steps,
        "rl_trained_tokens": rl_tokens,
        "control_trained_tokens": round(steps * cfg.sft_batch * chain_tokens),
        "losses": {str(k): v for k, v in sorted(losses.items())},
        "commands": [shell_line(cmd, env)],
    }


def stage_eval_control(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """The control model on the same problems with the same settings (skipped when the control was)."""
    done = read_done(ctx.dir("control"))
    if done is None or done.get("skipped"):
        rep.say("skipped: no control model (--with-control)", 1.0)
        return {"skipped": True, "outputs": {}, "commands": []}
    return run_eval_stage(ctx, rep, "eval_control", str(control_model(ctx)))


# ------------------------------------------------------------------------------------------------ TTS
def tts_run_command(
    ctx: Context,
    model: str,
    problems: int,
    methods: Sequence[str],
    budgets: Sequence[int],
    out_dir: Path,
    sets: Mapping[str, Any],
    nested: bool = False,
) -> list[str]:
    """``python -m e2c.tts`` on the first ``problems`` held-out problems of the run's eval folder, with the run's
    backend and dtype; ``sets`` become ``--set KEY=VALUE``; ``nested`` adds ``--nested-budgets``."""
    cfg = ctx.cfg
    return [
        sys.executable,
        "-m",
        "e2c.tts",
        "--model",
        model,
        "--dataset",
        "synthetic",
        "--data-dir",
        str(ctx.eval_dir),
        "--limit",
        str(problems),
        "--methods",
        *methods,
        "--budgets",
        *[str(b) for b in budgets],
        "--backend",
        cfg.backend,
        "--dtype",
        resolve_dtype(cfg.dtype),
        "--output-dir",
        str(out_dir),
        *(["--nested-budgets"] if nested else []),
        *[x for k, v in sets.items() for x in ("--set", f"{k}={v}")],
    ]


def tts_command(ctx: Context, model: str) -> list[str]:
    cfg = ctx.cfg
    sets = {
        "explore_budget": cfg.tts_explore_budget,
        "execute_budget": cfg.tts_execute_budget,
        "cot_tokens": cfg.tts_explore_budget + cfg.tts_execute_budget,
        "top_p": f"{cfg.tts_top_p:g}",
        "seed": cfg.seed,
    }
    return tts_run_command(
        ctx, model, cfg.tts_problems, cfg.tts_methods, cfg.tts_budgets, ctx.dir("tts") / "runs", sets
    )


def tts_results(tts_dir: Path) -> Path | None:
    """The TTS run's ``results.json`` (under ``runs/<dataset>/<model>/``), or None."""
    found = sorted((tts_dir / "runs").glob("*/*/results.json"))
    return found[0] if found else None


def stage_tts(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """Self-consistency against E2C methods at small budgets on the trained model (RL, else SFT)."""
    cfg = ctx.cfg
    if cfg.tts_problems <= 0:
        rep.say("skipped (--tts-problems 0)", 1.0)
        return {"skipped": True, "outputs": {}, "commands": []}
    rl = rl_model(ctx)
    model, which = (str(rl), "rl") if rl is not None else (str(sft_model(ctx)), "sft")
    cmd = tts_command(ctx, model)
    rep.say(
        f"{', '.join(cfg.tts_methods)} at K/N {', '.join(map(str, cfg.tts_budgets))} on {cfg.tts_problems} "
        f"held-out problems ({which} model)"
    )
    run_logged(cmd, ctx.dir("tts") / "log.txt", rep, tts_parser(), child_env())
    res = tts_results(ctx.dir("tts"))
    if res is None:
        raise UserError(f"the TTS run wrote no results under {ctx.dir('tts') / 'runs'}")
    return {
        "outputs": {
            "results": rel(res, ctx.out),
            "plot": rel(res.parent / "accuracy_vs_tokens.png", ctx.out),
            "csv": rel(res.parent / "results.csv", ctx.out),
        },
        "model": model,
        "model_stage": which,
        "commands": [shell_line(cmd)],
    }
