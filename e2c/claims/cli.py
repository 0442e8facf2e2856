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
from dataclasses import replace
from pathlib import Path
from typing import Any

from e2c.argtypes import (
    OUTPUT_DIR,
    TEXT,
    ValueType,
    at_least,
    check_value,
    positive,
    probability,
    whole,
)
from e2c.claims.config import (
    CLAIM_METHOD,
    DEPENDS,
    FAST,
    REFERENCE_METHOD,
    REQUIRES,
    STAGES,
    ClaimsConfig,
    eta_seconds,
    field_names,
    stage_settings,
    with_fast,
)
from e2c.claims.stages import (
    ClaimsContext,
    make_context,
    stage_adapt,
    stage_start,
    stage_tts,
    stage_weighting,
)
from e2c.cli import ArgumentParser
from e2c.entry import run_main
from e2c.errors import UserError
from e2c.generation import ALIASES as BACKEND_ALIASES
from e2c.generation import BACKENDS
from e2c.quickstart.context import read_done
from e2c.quickstart.progress import Reporter
from e2c.quickstart.runner import Pipeline, main_of, out_folder, run_pipeline
from e2c.tts import methods_with


def stage_report(cc: ClaimsContext, rep: Reporter) -> dict[str, Any]:
    from e2c.claims.report import write_report

    res = write_report(cc)
    rep.say(f"wrote {cc.out / 'report.md'}", 1.0)
    return res


RUNNERS: dict[str, Callable[[ClaimsContext, Reporter], dict[str, Any]]] = {
    "start": stage_start,
    "weighting": stage_weighting,
    "tts": stage_tts,
    "adapt": stage_adapt,
    "report": stage_report,
}


def _show(v: Any) -> str:
    return " ".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)


# The value type of every ClaimsConfig field that is a flag with a value: the parser checks a flag with it,
# and validate() checks a whole config (the --fast preset's values) with the same rule.
TYPES: dict[str, ValueType] = {
    "out": OUTPUT_DIR,
    "rl_steps": whole(1),  # the claims start from an RL model
    "weight_coefs": at_least(0),  # 0 masks the exploration out of the policy gradient
    "weight_seeds": whole(0),
    "delta": probability(open_zero=True),  # an accuracy effect, as a fraction
    "tts_problems": whole(1),
    "tts_budgets": whole(1),
    "tts_methods": TEXT,
    "tts_explore_budget": whole(1),
    "tts_execute_budget": whole(1),
    "tts_judge_tokens": whole(1),
    "tts_tree_step_tokens": whole(1),
    "tts_tree_branching": whole(1),
    "ratio_delta": at_least(0),
    "adapt_family": TEXT,
    "adapt_level": whole(1, 3),
    "adapt_max_chain_tokens": whole(1),
    "adapt_eval_max_tokens": whole(1),
    "adapt_train": whole(1),
    "adapt_eval": whole(1),
    "adapt_steps": whole(1),
    "adapt_batch": whole(1),
    "adapt_lr": positive(),
    "adapt_reg_frac": probability(),  # and < 1 (validate): a share of 1 leaves no exploration-only rows
}


def _help(key: str, text: str) -> str:
    d = getattr(ClaimsConfig(), key)
    fast = f"; --fast: {_show(FAST[key])}" if key in FAST else ""
    return f"{text} (default: {_show(d)}{fast})"


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="scripts/claims.sh",
        description="The E2C paper's claims at laptop scale: exploration weighting, cheap test-time scaling, "
        "exploration-only adaptation; each with its control, interval and verdict.",
        epilog=f"Stages, in order: {', '.join(STAGES)}. Outputs: <out>/<stage>/, <out>/report.md, "
        "<out>/report.json.",
    )

    def flag(group: Any, key: str, text: str, **kwargs: Any) -> None:
        """``--key`` with the field's value type (None default: only a flag given explicitly is set)."""
        group.add_argument(
            f"--{key.replace('_', '-')}", type=TYPES[key], default=None, help=_help(key, text), **kwargs
        )

    a = p.add_argument
    flag(p, "out", "output folder")
    a("--fast", action="store_true", help="the same stages on the tiny test model at tiny sizes (CI)")
    a(
        "--from",
        dest="from_stage",
        default=None,
        type=TEXT,
        metavar="STAGE",
        help=f"redo this stage and every later one ({', '.join(STAGES)}; default: none)",
    )
    a("--force", action="store_true", help="redo every stage, discarding earlier results (default: off)")
    flag(p, "rl_steps", "GRPO steps of every RL run")
    p.add_argument(
        "--backend",
        default=None,
        choices=[*BACKENDS, *BACKEND_ALIASES],
        help=_help(
            "backend",
            "generation backend of every evaluation and of TTS: auto (vLLM when installed, else hf), vllm, hf",
        ),
    )
    g = p.add_argument_group("claim 1: exploration weighting")
    flag(
        g,
        "weight_coefs",
        "exploration advantage coefficients (the first is the claim's; 0 masks "
        "the exploration out of the policy gradient)",
        nargs="+",
    )
    flag(g, "weight_seeds", "seeds per coefficient (data order and rollout sampling)", nargs="+")
    flag(
        g,
        "delta",
        "smallest accuracy effect that matters, as a fraction (an interval below it rules the effect out)",
    )
    g = p.add_argument_group("claim 2: test-time scaling (python -m e2c.tts on the RL model)")
    flag(g, "tts_problems", "held-out problems")
    flag(g, "tts_budgets", "K values", nargs="+")
    flag(g, "tts_methods", "methods", nargs="+")
    g.add_argument(
        "--tts-nested",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=_help(
            "tts_nested",
            f"{' and '.join(methods_with('nestable'))}: smaller budgets read off the largest one's first draws",
        ),
    )
    flag(g, "tts_explore_budget", "exploration tokens")
    flag(g, "tts_execute_budget", "execution tokens")
    flag(g, "tts_judge_tokens", "judge / scorer reply tokens")
    flag(g, "tts_tree_step_tokens", "e2c_tot step tokens")
    flag(g, "tts_tree_branching", "e2c_tot children per expanded node")
    flag(
        g,
        "ratio_delta",
        "smallest token saving that matters: a ratio interval below 1 + this rules a saving out",
    )
    g = p.add_argument_group("claim 3: exploration-only adaptation to a held-out family")
    flag(g, "adapt_family", "synthetic family (not in SFT/RL)")
    flag(g, "adapt_level", "its level (1-3)")
    flag(g, "adapt_max_chain_tokens", "longest new-family chain kept, in the model's tokens")
    flag(g, "adapt_eval_max_tokens", "new tokens per chain in the new-family evaluations")
    flag(g, "adapt_train", "training problems")
    flag(g, "adapt_eval", "held-out problems")
    flag(g, "adapt_steps", "SFT steps per method")
    flag(g, "adapt_batch", "rows per step")
    flag(g, "adapt_lr", "learning rate")
    flag(g, "adapt_reg_frac", "EF-SFT: share of problems kept as full chains")
    return p


CONFIG_FLAGS = tuple(f for f in field_names() if f != "fast")


def config_from_args(args: argparse.Namespace) -> ClaimsConfig:
    given = {k: getattr(args, k) for k in CONFIG_FLAGS if getattr(args, k) is not None}
    # paths as the config keeps them (text); lists as tuples
    given = {
        k: tuple(v) if isinstance(v, list) else str(v) if isinstance(v, Path) else v for k, v in given.items()
    }
    cfg = with_fast(ClaimsConfig(), set(given)) if args.fast else ClaimsConfig()
    cfg = replace(cfg, **given)
    validate(cfg)
    return cfg


def validate(cfg: ClaimsConfig) -> None:
    """One UserError line for a setting out of range: every field with a value type (:data:`TYPES`, the
    flags' own rule), then what one value cannot say alone."""
    from e2c.data.synthetic.families import FAMILIES
    from e2c.quickstart.config import DEFAULT_FAMILIES
    from e2c.tts import METHODS

    for key, kind in TYPES.items():
        if key == "out":  # checked where it is used, before any work
            continue
        value = getattr(cfg, key)
        for v in value if isinstance(value, tuple) else (value,):
            check_value(v, kind, f"--{key.replace('_', '-')}")
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
    bad = [m for m in cfg.tts_methods if m not in METHODS]
    if bad:
        raise UserError(f"--tts-methods: unknown method {bad[0]!r}; valid: {', '.join(sorted(METHODS))}")
    for need, why in (
        (REFERENCE_METHOD, "the reference of the token ratio"),
        (CLAIM_METHOD, "the claim's method"),
    ):
        if need not in cfg.tts_methods:
            raise UserError(f"--tts-methods must include {need} ({why})")
    if cfg.adapt_family not in FAMILIES:
        raise UserError(f"--adapt-family: unknown family {cfg.adapt_family!r}; valid: {', '.join(FAMILIES)}")
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
        settings=stage_settings,
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
    report = read_done(cc.dir("report")) or {}
    return {
        "report": str(out / "report.md"),
        "json": str(out / "report.json"),
        "verdicts": report.get("verdicts", {}),
    }


def main(argv: list[str] | None = None) -> int:
    return main_of(argv, build_parser(), config_from_args, run)


if __name__ == "__main__":  # pragma: no cover
    run_main(main)
