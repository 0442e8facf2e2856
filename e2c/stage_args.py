"""A stage's arguments checked before any node starts (``python -m e2c.stage_args STAGE [ARGS...]``).

``scripts/slurm_e2c.sbatch`` runs this first, in a dry run too: the stage script's launcher reads ``ARGS``
with its own parser and argument checks (flags, choices such as ``--stage 1|2|both``, values, flags that
contradict each other, the curriculum file), and a flag that the stage script fixes (``e2c_dapo.sh``'s
``--algo dapo``, ``ef-sft.sh``'s ``--mode ef-sft``, see ``scripts/_launch_checks.sh``) may not say otherwise.
A bad argument is then one ``error:`` line before ray or torchrun start, instead of a dry run that exits 0
or a job that fails after its nodes came up. What needs the data, the model or the composed config is the
stage's own check, when it runs. Nothing is printed when the arguments pass.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.paths import configs_dir
from e2c.launch.lora import lora_overrides
from e2c.launch.tracking import tracker_names
from e2c.rl import curriculum, launch
from e2c.sft import run


@dataclass(frozen=True)
class StageScript:
    """What a stage of ``slurm_e2c.sbatch`` runs: its script, the launcher module, and the flag the script
    passes first (``flag value``); ``fixed``: the script refuses another value of that flag."""

    script: str
    module: str
    flag: str | None = None
    value: str | None = None
    fixed: str = ""  # the hint of the script's refusal (e2c_fixed_flag), when it fixes the flag


STAGES: dict[str, StageScript] = {
    "sft": StageScript("scripts/e2c_sft.sh", "e2c.sft.run", "--mode", "sft"),
    "ef-sft": StageScript(
        "scripts/ef-sft.sh",
        "e2c.sft.run",
        "--mode",
        "ef-sft",
        "for E2C SFT on full chains run scripts/e2c_sft.sh",
    ),
    "grpo": StageScript("scripts/e2c_rl.sh", "e2c.rl.launch", "--algo", "grpo"),
    "dapo": StageScript(
        "scripts/e2c_dapo.sh",
        "e2c.rl.launch",
        "--algo",
        "dapo",
        "for GRPO run scripts/e2c_rl.sh (the same flags and variables)",
    ),
    "curriculum": StageScript("scripts/e2c_curriculum.sh", "e2c.rl.curriculum"),
}


@dataclass(frozen=True)
class StageArgs:
    """The command line: the stage and its arguments (``python -m e2c.stage_args --help``)."""

    stage: str = field(
        default="", metadata=setting("the slurm_e2c.sbatch stage", flag="stage", choices=list(STAGES))
    )
    args: tuple[str, ...] = field(
        default=(),
        metadata=setting(
            "the stage's arguments, as its script takes them", flag="args", nargs=argparse.REMAINDER
        ),
    )


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m e2c.stage_args", description=__doc__.splitlines()[0])
    add_setting_flags(p, StageArgs)
    return p


def _before_overrides(args: list[str]) -> list[str]:
    return args[: args.index("--")] if "--" in args else args


def check_rl(stage: StageScript, args: list[str]) -> None:

    os.environ.pop("NNODES", None)  # the sbatch sets the stage's own; the caller's is not this check's
    ns = launch.parse_args([stage.flag or "", stage.value or "", *args])
    if stage.fixed and ns.algo != stage.value:
        raise UserError(
            f"{stage.script} runs --algo {stage.value}, so --algo {ns.algo!r} is refused; {stage.fixed}"
        )


def check_sft(stage: StageScript, args: list[str]) -> None:

    ns, _ = run.parse([stage.flag or "", stage.value or "", *args])
    tracker_names(ns.logger)
    if stage.fixed and ns.mode != stage.value:
        raise UserError(
            f"{stage.script} runs --mode {stage.value}, so --mode {ns.mode!r} is refused; {stage.fixed}"
        )


def check_curriculum(stage: StageScript, args: list[str]) -> None:

    ns, lora = curriculum.parse(args)
    tracker_names(ns.logger)
    lora_overrides(lora, "actor_rollout_ref.model")
    curriculum.load_curriculum(ns.config or configs_dir() / "e2c_curriculum.yaml")


CHECKS = {"e2c.rl.launch": check_rl, "e2c.sft.run": check_sft, "e2c.rl.curriculum": check_curriculum}


def main(argv: list[str] | None = None) -> int:
    ns = from_flags(build_parser().parse_args(argv), StageArgs)
    stage = STAGES[ns.stage]
    if not {"-h", "--help"} & set(_before_overrides(ns.args)):  # help: the stage prints it when it runs
        CHECKS[stage.module](stage, list(ns.args))
    checks_done()
    return 0


if __name__ == "__main__":
    run_main(main)
