"""SFT and EF-SFT on verl's SFT trainer (``bash scripts/e2c_sft.sh`` / ``bash scripts/ef-sft.sh`` wrap this).

    python -m e2c.sft.run --mode ef-sft --model embedded --steps 6      # CPU demo, no hub needed

In order: checks the data, the Hydra overrides, the output folder and the model (each failure one line, exit
2, before anything is written; ``E2C_CHECK_ONLY=1`` stops there); gives the base model the E2C tags once
(``--tagged-dir``); launches ``torchrun -m verl.trainer.sft_trainer`` with :mod:`e2c.sft.dataset` (the CPU
preset ``configs/cpu/sft.yaml`` without GPUs); exports verl's last checkpoint atomically to
``<output-dir>/final``; prints the losses and, last, one JSON object. A rerun resumes from verl's last
checkpoint; a finished run is not repeated without ``--force``.
More: docs/training.md, "SFT and EF-SFT".
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, setting
from e2c.commandline.parsing import (
    ArgumentParser,
    exit_interrupted,
    interrupt_on_sigterm,
    quiet_libraries,
    resume_command,
)
from e2c.core.errors import UserError, fail
from e2c.core.paths import configs_dir
from e2c.core.run_folder import FORCE_HELP, RunFolder, identity_overrides, local_paths
from e2c.launch.checkpoints import STEPS_KEY, last_override, latest_checkpoint, trained_to
from e2c.launch.checks import check_launcher_overrides
from e2c.launch.lora import add_lora_args, lora_overrides
from e2c.launch.tracking import tracker_env, tracker_names
from e2c.sft.export import export_final
from e2c.sft.launch import (
    Plan,
    SFTSettings,
    cpu_default_steps,
    finished,
    hydra_overrides,
    launch_command,
    make_plan,
    prepare,
    run_trainer,
    train_log,
)
from e2c.sft.metrics import StepLosses, read_losses


@dataclass(frozen=True)
class RunControl:
    """What to do with the run folder; each field is its flag, declared here once."""

    force: bool = field(
        default=False, metadata=setting(FORCE_HELP + "; also trains a finished run again", flag="--force")
    )
    dry_run: bool = field(
        default=False, metadata=setting("print the trainer command and exit", flag="--dry-run")
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line: :class:`SFTSettings`' flags, LoRA's and :class:`RunControl`'s, each declared once
    in its dataclass; anything of the form key=value is a Hydra override (:func:`parse`)."""
    p = ArgumentParser(
        prog="python -m e2c.sft.run",
        description=__doc__.split("\n\n")[0],
        epilog="Anything else of the form key=value is passed to verl's SFT trainer as a Hydra override.",
    )
    add_setting_flags(p, SFTSettings)
    add_lora_args(p)
    add_setting_flags(p, RunControl)
    return p


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    args, rest = build_parser().parse_known_args(argv)
    rest = [r for r in rest if r != "--"]  # the RL scripts' way of marking Hydra overrides works here too
    bad = [r for r in rest if r.startswith("-") or "=" not in r]
    if bad:
        raise UserError(
            f"unrecognized argument {bad[0]!r}: flags are listed by --help, Hydra overrides look like key=value"
        )
    # Before the user's overrides, which win; part of the run's identity (a LoRA re-run is another run).
    lora = [f"{k}={v}" for k, v in lora_overrides(args, "model").items()]
    return args, lora + rest


def main(argv: list[str] | None = None) -> int:
    quiet_libraries(generation=False)
    args, overrides = parse(argv)
    trackers = tracker_names(args.logger)
    plan = make_plan(SFTSettings.from_flags(args), overrides)
    total = args.steps if args.steps is not None else (None if plan.gpus else cpu_default_steps())
    launcher = hydra_overrides(plan, total, trackers)
    check_launcher_overrides(launcher[: len(launcher) - len(plan.overrides)])
    cmd = launch_command(
        plan, launcher, Path(args.config_dir).resolve() if args.config_dir else configs_dir()
    )
    # Another node's launcher (node_rank > 0) writes its own log into the folder node 0 holds.
    run = sft_run_folder(plan, args.force)
    if plan.node_rank == 0 and not args.dry_run:
        run.check()
    checks_done()
    interrupt_on_sigterm()  # a SIGTERM to this launcher alone stops the trainer too (run_trainer)
    try:
        if plan.node_rank == 0 and not args.dry_run:
            with run.claim():
                return launch(args, plan, cmd, total, trackers)
        return launch(args, plan, cmd, total, trackers)
    except KeyboardInterrupt as e:
        ckpt = latest_checkpoint(plan.ckpt_dir)
        saved = f"the latest checkpoint is {ckpt}" if ckpt else f"no checkpoint yet in {plan.ckpt_dir}"
        exit_interrupted(
            e, saved, resume_command(["-m", "e2c.sft.run"], list(sys.argv[1:] if argv is None else argv))
        )


def sft_run_folder(plan: Plan, force: bool) -> RunFolder:
    """The run folder's claim: an SFT run is its mode, base model, data and the overrides that change
    what it computes (:func:`e2c.core.run_folder.identity_overrides`; not the step count: a run may go on)."""
    identity = {
        "mode": plan.mode,
        "base_model": local_paths([plan.model])[0],
        "train_files": local_paths(plan.train),
        "val_files": local_paths(plan.val),
        "overrides": identity_overrides(plan.overrides),
    }
    return RunFolder(plan.output_dir, "sft", identity, force=force)


def launch(
    args: argparse.Namespace, plan: Plan, cmd: list[str], total: int | None, trackers: list[str]
) -> int:
    """The run, once every check passed (and, on node 0, with the run folder held)."""
    prepare(plan)  # the run folder and the model's tagged copy, now that every check passed
    devices = f"{plan.gpus} GPU(s)" if plan.gpus else f"no GPU, {plan.ranks} CPU rank(s)"
    print(f"e2c sft: mode {plan.mode}, model {plan.model_note}, {devices} x {plan.nnodes} node(s)")
    print(f"e2c sft: train {', '.join(plan.train)}; output {plan.output_dir}", flush=True)
    if args.dry_run:
        print(shlex.join(cmd))  # quoted: ${now:...} and [a,b] survive a paste into a shell
        return 0
    if finished(plan, total):
        print(f"e2c sft: {plan.final_dir} is already the result of this run (use --force to train again)")
        return 0
    env = dict(os.environ)
    if plan.gpus == 0:
        env.setdefault("E2C_FORCE_CPU", "1")  # the verl plugin picks its CPU platform in every process
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.update(tracker_env(trackers, plan.output_dir))
    t0 = time.monotonic()
    # the step count verl runs: the user's override of it wins over --steps (hydra_overrides puts theirs last)
    steps = last_override(cmd, STEPS_KEY)
    step = trained_to(plan.ckpt_dir, int(steps) if steps and steps.isdigit() else None, cmd)
    if step is not None:  # killed after its last checkpoint: export it, train nothing (verl would add a step)
        print(f"e2c sft: {plan.ckpt_dir} holds step {step} of {steps}: nothing left to train", flush=True)
        rc, tail = 0, None
    else:
        rc, tail = run_trainer(cmd, plan.output_dir, env, plan.node_rank)
    wall = time.monotonic() - t0
    if rc != 0:
        fail(
            f"verl's SFT trainer exited with status {rc}; its output is in "
            f"{train_log(plan.output_dir, plan.node_rank)}",
            1,
        )
    if plan.node_rank != 0:
        return 0  # rank-0 node exports
    ckpt = latest_checkpoint(plan.ckpt_dir)
    if ckpt is None:
        fail(f"the trainer finished but left no checkpoint in {plan.ckpt_dir}", 1)
    losses = read_losses(plan.output_dir)  # every launch of the run, a resumed one included
    meta = run_meta(plan, ckpt, total, losses, tail.seconds_per_step() if tail else None, wall)
    try:
        final = export_final(ckpt, plan.final_dir, meta)
    except UserError as e:  # the run's own checkpoint did not convert: not the user's input (exit 1)
        fail(str(e), 1)
    print("\nstep  loss")
    for k, v in sorted(losses.train.items()):
        print(f"{k:>4}  {v:.4f}")
    shown = ("mode", "losses", "seconds_per_step", "wall_seconds", "trained_share")
    print(json.dumps({"final": str(final), **{k: meta[k] for k in shown}}))
    return 0


def run_meta(
    plan: Plan, ckpt: Path, total: int | None, losses: StepLosses, seconds_per_step: float | None, wall: float
) -> dict[str, Any]:
    """What ``final/e2c_sft.json`` records about the run (also how a re-run knows it is finished)."""
    stats = {}
    if plan.stats_path.is_file():
        stats = json.loads(plan.stats_path.read_text()).get(",".join(plan.train), {})
    return {
        "mode": plan.mode,
        "base_model": plan.model,
        "train_files": plan.train,
        "val_files": plan.val,
        "checkpoint": str(ckpt),
        "total_steps_requested": total,
        "overrides": plan.overrides,
        "losses": {str(k): v for k, v in sorted(losses.train.items())},
        "val_losses": {str(k): v for k, v in sorted(losses.val.items())},
        "seconds_per_step": seconds_per_step,
        "wall_seconds": round(wall, 1),
        "trained_share": stats.get("trained_share"),
        "trained_tokens": stats.get("trained_tokens"),
        "assistant_tokens": stats.get("assistant_tokens"),
    }


if __name__ == "__main__":
    run_main(main)
