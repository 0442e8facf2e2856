"""``python -m e2c.quickstart`` (``bash scripts/quickstart.sh``): the command line and the stage runner.

    bash scripts/quickstart.sh                    # the embedded SmolLM2-135M, everything, outputs/quickstart
    bash scripts/quickstart.sh --fast             # the tiny test model at tiny sizes (a few minutes)
    bash scripts/quickstart.sh --from sft         # redo SFT and every stage after it
    bash scripts/quickstart.sh --sft-lr 1e-4 --from sft

A rerun skips finished stages and resumes the one that was interrupted. The last line printed is one JSON
object: the report's paths and the headline accuracies.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from e2c.commandline.entry import run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.generation import pick_backend
from e2c.quickstart.config import (
    DEPENDS,
    ETA_SECONDS,
    REQUIRES,
    SECTIONS,
    STAGES,
    Config,
    resolve_dtype,
)
from e2c.quickstart.context import Context
from e2c.quickstart.data import stage_data
from e2c.quickstart.progress import Reporter
from e2c.quickstart.runner import (
    Pipeline,
    add_run_flags,
    main_of,
    out_folder,
    report_stage,
    run_pipeline,
    summary,
)
from e2c.quickstart.stages import (
    rl_memory_check,
    stage_baseline,
    stage_control,
    stage_eval_control,
    stage_eval_rl,
    stage_eval_sft,
    stage_filter,
    stage_rl,
    stage_sft,
    stage_tts,
)

RUNNERS: dict[str, Callable[[Context, Reporter], dict[str, Any]]] = {
    "data": stage_data,
    "baseline": stage_baseline,
    "sft": stage_sft,
    "eval_sft": stage_eval_sft,
    "filter": stage_filter,
    "rl": stage_rl,
    "eval_rl": stage_eval_rl,
    "tts": stage_tts,
    "control": stage_control,
    "eval_control": stage_eval_control,
    "report": report_stage("e2c.quickstart.report"),
}


# ------------------------------------------------------------------------------------------------ CLI
def build_parser() -> argparse.ArgumentParser:
    """Every :class:`Config` field is a flag of its name (declared there once); the rest say what to redo."""
    p = ArgumentParser(
        prog="scripts/quickstart.sh",
        description="The whole E2C life cycle on one machine: data, baseline eval, SFT, pass-rate filter, GRPO, "
        "evals, TTS, an optional equal-compute control, report.",
        epilog=f"Stages, in order: {', '.join(STAGES)}. Outputs: <out>/<stage>/, <out>/report.md, <out>/report.json.",
    )
    Config.add_flags(p, SECTIONS)
    add_run_flags(p)
    return p


def config_from_args(args: argparse.Namespace) -> Config:
    """The run's Config: defaults, then the --fast preset, then every flag given explicitly."""
    cfg = Config.from_flags(args)
    validate(cfg)
    # Resolved now, so each stage records the backend it actually used (auto changes with the install).

    return replace(cfg, backend=pick_backend(cfg.backend))


def validate(cfg: Config) -> None:
    """One UserError line for a setting out of range: every field by its declared value type (the flags' own
    rule, for the preset's values and a study's too), then the RL run's memory."""
    cfg.check_values()
    # Last: it composes the RL stage's config (about a second) and reads the model's shape.
    rl_memory_check(cfg)


# ------------------------------------------------------------------------------------------------ runner
def pipeline(fast: bool) -> Pipeline:
    return Pipeline(
        tool="quickstart",
        stages=STAGES,
        requires=REQUIRES,
        depends=DEPENDS,
        runners=RUNNERS,
        settings=Config.stage_settings,
        eta=ETA_SECONDS[fast],
    )


def run(cfg: Config, from_stage: str | None, force: bool) -> dict[str, Any]:
    """Plan (refusing bad input before anything is changed), then run the stages in order."""
    out = out_folder(cfg.out)
    ctx = Context(cfg, out)
    header = f"model {cfg.model}{' (--fast)' if cfg.fast else ''}, dtype {resolve_dtype(cfg.dtype)}, backend {cfg.backend}"
    run_pipeline(pipeline(cfg.fast), ctx, from_stage, force, header)
    return summary(ctx, "accuracy", "headline")


def main(argv: list[str] | None = None) -> int:
    return main_of(argv, build_parser(), config_from_args, run)


if __name__ == "__main__":  # pragma: no cover
    run_main(main)
