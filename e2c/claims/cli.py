"""``python -m e2c.claims`` (``bash scripts/claims.sh``): the paper's three claims tested at laptop scale.

    bash scripts/claims.sh                 # the embedded SmolLM2-135M, everything, outputs/claims
    bash scripts/claims.sh --fast          # the tiny test model at tiny sizes (CI)
    bash scripts/claims.sh --from tts      # redo the TTS experiment and the report

Stages: start (a quickstart run: data, SFT, pass-rate filter, GRPO, evaluations), weighting (claim 1), tts
(claim 2), adapt (claim 3), report. A rerun skips finished stages and resumes the one that was interrupted
at the arm, run or evaluation it was in. The last line printed is one JSON object: the report's paths and
each claim's verdict.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from typing import Any

from e2c.claims.config import (
    CLAIM_METHOD,
    DEPENDS,
    REFERENCE_METHOD,
    REQUIRES,
    SECTIONS,
    STAGES,
    ClaimsConfig,
    eta_seconds,
)
from e2c.claims.stages import (
    ClaimsContext,
    make_context,
    stage_adapt,
    stage_start,
    stage_tts,
    stage_weighting,
)
from e2c.commandline.entry import run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.data.synthetic.families import FAMILIES
from e2c.quickstart.config import DEFAULT_FAMILIES
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

RUNNERS: dict[str, Callable[[ClaimsContext, Reporter], dict[str, Any]]] = {
    "start": stage_start,
    "weighting": stage_weighting,
    "tts": stage_tts,
    "adapt": stage_adapt,
    "report": report_stage("e2c.claims.report"),
}


def build_parser() -> argparse.ArgumentParser:
    """Every :class:`ClaimsConfig` field is a flag of its name (declared there once); the rest say what to
    redo."""
    p = ArgumentParser(
        prog="scripts/claims.sh",
        description="The E2C paper's claims at laptop scale: exploration weighting, cheap test-time scaling, "
        "exploration-only adaptation; each with its control, interval and verdict.",
        epilog=f"Stages, in order: {', '.join(STAGES)}. Outputs: <out>/<stage>/, <out>/report.md, "
        "<out>/report.json.",
    )
    ClaimsConfig.add_flags(p, SECTIONS)
    add_run_flags(p)
    return p


def config_from_args(args: argparse.Namespace) -> ClaimsConfig:
    cfg = ClaimsConfig.from_flags(args)
    validate(cfg)
    return cfg


def validate(cfg: ClaimsConfig) -> None:
    """One UserError line for a setting out of range: every field by its declared value type (the flags' own
    rule, for the preset's values too), then what one value cannot say alone."""
    cfg.check_values()
    if len(cfg.weight_coefs) < 2 or len(set(cfg.weight_coefs)) != len(cfg.weight_coefs):
        raise UserError(
            f"--weight-coefs needs at least two different coefficients, got {list(cfg.weight_coefs)}"
        )
    seeds = cfg.weight_seeds
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise UserError(
            "--weight-seeds must be at least two distinct non-negative seeds (seed-to-seed variation is part "
            f"of the interval), got {list(seeds)}"
        )
    for need, why in (
        (REFERENCE_METHOD, "the reference of the token ratio"),
        (CLAIM_METHOD, "the claim's method"),
    ):
        if need not in cfg.tts_methods:
            raise UserError(f"--tts-methods must include {need} ({why})")
    if cfg.adapt_family in DEFAULT_FAMILIES:
        held = [f for f in FAMILIES if f not in DEFAULT_FAMILIES]
        raise UserError(
            f"--adapt-family {cfg.adapt_family} is trained on in SFT and RL; pick a held-out one: {', '.join(held)}"
        )
    if cfg.adapt_reg_frac >= 1:
        raise UserError(f"--adapt-reg-frac must be in [0, 1), got {cfg.adapt_reg_frac}")


# ------------------------------------------------------------------------------------------------ runner
def pipeline(cfg: ClaimsConfig) -> Pipeline:
    return Pipeline(
        tool="claims",
        stages=STAGES,
        requires=REQUIRES,
        depends=DEPENDS,
        runners=RUNNERS,
        settings=ClaimsConfig.stage_settings,
        eta=eta_seconds(cfg),
    )


def run(cfg: ClaimsConfig, from_stage: str | None, force: bool) -> dict[str, Any]:
    out = out_folder(cfg.out)
    cc = make_context(cfg, out)
    q = out / "quickstart"
    # --force redoes the shared start too; a folder there that no quickstart made is never removed (checked
    # with the pipeline's own checks, before any of them can stop a check-only run)
    clear = force and q.exists()
    if clear and not any(
        (q / s / n).is_file() for s in ("data", "sft") for n in ("STARTED.json", "DONE.json")
    ):
        raise UserError(
            f"{q} exists and was not made by a quickstart run; pick another --out (nothing was changed)"
        )

    def clear_quickstart() -> None:
        if clear:
            shutil.rmtree(q)

    header = f"{'--fast, ' if cfg.fast else ''}backend {cc.qcfg.backend}"
    run_pipeline(pipeline(cfg), cc, from_stage, force, header, before=clear_quickstart)
    return summary(cc, "verdicts", "verdicts")


def main(argv: list[str] | None = None) -> int:
    return main_of(argv, build_parser(), config_from_args, run)


if __name__ == "__main__":  # pragma: no cover
    run_main(main)
