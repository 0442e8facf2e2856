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
import math
import shutil
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

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
from e2c.errors import UserError
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
    a = p.add_argument
    a("--out", default=None, help=_help("out", "output folder"))
    a("--fast", action="store_true", help="the same stages on the tiny test model at tiny sizes (CI)")
    a(
        "--from",
        dest="from_stage",
        default=None,
        metavar="STAGE",
        help=f"redo this stage and every later one ({', '.join(STAGES)}; default: none)",
    )
    a("--force", action="store_true", help="redo every stage, discarding earlier results (default: off)")
    a("--rl-steps", type=int, default=None, help=_help("rl_steps", "GRPO steps of every RL run"))
    g = p.add_argument_group("claim 1: exploration weighting")
    g.add_argument(
        "--weight-coefs",
        type=float,
        nargs="+",
        default=None,
        help=_help(
            "weight_coefs",
            "exploration advantage coefficients (the first is the claim's; 0 masks "
            "the exploration out of the policy gradient)",
        ),
    )
    g.add_argument(
        "--weight-seeds",
        type=int,
        nargs="+",
        default=None,
        help=_help("weight_seeds", "seeds per coefficient (data order and rollout sampling)"),
    )
    g.add_argument(
        "--delta",
        type=float,
        default=None,
        help=_help(
            "delta",
            "smallest accuracy effect that matters, as a fraction (an interval below it "
            "rules the effect out)",
        ),
    )
    g = p.add_argument_group("claim 2: test-time scaling (python -m e2c.tts on the RL model)")
    g.add_argument("--tts-problems", type=int, default=None, help=_help("tts_problems", "held-out problems"))
    g.add_argument("--tts-budgets", type=int, nargs="+", default=None, help=_help("tts_budgets", "K values"))
    g.add_argument("--tts-methods", nargs="+", default=None, help=_help("tts_methods", "methods"))
    g.add_argument(
        "--tts-nested",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=_help(
            "tts_nested",
            f"{' and '.join(methods_with('nestable'))}: smaller budgets read off the largest one's first draws",
        ),
    )
    g.add_argument(
        "--tts-explore-budget", type=int, default=None, help=_help("tts_explore_budget", "exploration tokens")
    )
    g.add_argument(
        "--tts-execute-budget", type=int, default=None, help=_help("tts_execute_budget", "execution tokens")
    )
    g.add_argument(
        "--tts-judge-tokens",
        type=int,
        default=None,
        help=_help("tts_judge_tokens", "judge / scorer reply tokens"),
    )
    g.add_argument(
        "--tts-tree-step-tokens",
        type=int,
        default=None,
        help=_help("tts_tree_step_tokens", "e2c_tot step tokens"),
    )
    g.add_argument(
        "--tts-tree-branching",
        type=int,
        default=None,
        help=_help("tts_tree_branching", "e2c_tot children per expanded node"),
    )
    g.add_argument(
        "--ratio-delta",
        type=float,
        default=None,
        help=_help(
            "ratio_delta",
            "smallest token saving that matters: a ratio interval below 1 + this rules a saving out",
        ),
    )
    g = p.add_argument_group("claim 3: exploration-only adaptation to a held-out family")
    g.add_argument(
        "--adapt-family", default=None, help=_help("adapt_family", "synthetic family (not in SFT/RL)")
    )
    g.add_argument("--adapt-level", type=int, default=None, help=_help("adapt_level", "its level (1-3)"))
    g.add_argument(
        "--adapt-max-chain-tokens",
        type=int,
        default=None,
        help=_help("adapt_max_chain_tokens", "longest new-family chain kept, in the model's tokens"),
    )
    g.add_argument(
        "--adapt-eval-max-tokens",
        type=int,
        default=None,
        help=_help("adapt_eval_max_tokens", "new tokens per chain in the new-family evaluations"),
    )
    g.add_argument("--adapt-train", type=int, default=None, help=_help("adapt_train", "training problems"))
    g.add_argument("--adapt-eval", type=int, default=None, help=_help("adapt_eval", "held-out problems"))
    g.add_argument("--adapt-steps", type=int, default=None, help=_help("adapt_steps", "SFT steps per method"))
    g.add_argument("--adapt-batch", type=int, default=None, help=_help("adapt_batch", "rows per step"))
    g.add_argument("--adapt-lr", type=float, default=None, help=_help("adapt_lr", "learning rate"))
    g.add_argument(
        "--adapt-reg-frac",
        type=float,
        default=None,
        help=_help("adapt_reg_frac", "EF-SFT: share of problems kept as full chains"),
    )
    return p


CONFIG_FLAGS = tuple(f for f in field_names() if f != "fast")


def config_from_args(args: argparse.Namespace) -> ClaimsConfig:
    given = {k: getattr(args, k) for k in CONFIG_FLAGS if getattr(args, k) is not None}
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items()}
    cfg = with_fast(ClaimsConfig(), set(given)) if args.fast else ClaimsConfig()
    cfg = replace(cfg, **given)
    validate(cfg)
    return cfg


def validate(cfg: ClaimsConfig) -> None:
    """One UserError line for a setting out of range."""
    from e2c.data.synthetic.families import FAMILIES
    from e2c.quickstart.config import DEFAULT_FAMILIES
    from e2c.tts import METHODS

    if cfg.rl_steps < 1:
        raise UserError(
            f"--rl-steps must be at least 1 (the claims start from an RL model), got {cfg.rl_steps}"
        )
    if len(cfg.weight_coefs) < 2 or len(set(cfg.weight_coefs)) != len(cfg.weight_coefs):
        raise UserError(
            f"--weight-coefs needs at least two different coefficients, got {list(cfg.weight_coefs)}"
        )
    if not all(math.isfinite(c) and c >= 0 for c in cfg.weight_coefs):
        raise UserError(f"--weight-coefs must be finite and >= 0, got {list(cfg.weight_coefs)}")
    seeds = cfg.weight_seeds
    if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
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
    if not cfg.tts_budgets or min(cfg.tts_budgets) < 1:
        raise UserError(f"--tts-budgets must be positive, got {list(cfg.tts_budgets)}")
    if cfg.adapt_family not in FAMILIES:
        raise UserError(f"--adapt-family: unknown family {cfg.adapt_family!r}; valid: {', '.join(FAMILIES)}")
    if cfg.adapt_family in DEFAULT_FAMILIES:
        held = [f for f in FAMILIES if f not in DEFAULT_FAMILIES]
        raise UserError(
            f"--adapt-family {cfg.adapt_family} is trained on in SFT and RL; pick a held-out one: {', '.join(held)}"
        )
    if not 1 <= cfg.adapt_level <= 3:
        raise UserError(f"--adapt-level must be 1, 2 or 3, got {cfg.adapt_level}")
    for k in (
        "tts_problems",
        "tts_explore_budget",
        "tts_execute_budget",
        "tts_judge_tokens",
        "tts_tree_step_tokens",
        "tts_tree_branching",
        "adapt_train",
        "adapt_eval",
        "adapt_max_chain_tokens",
        "adapt_eval_max_tokens",
        "adapt_steps",
        "adapt_batch",
    ):
        if getattr(cfg, k) < 1:
            raise UserError(f"--{k.replace('_', '-')} must be at least 1, got {getattr(cfg, k)}")
    if not 0 <= cfg.adapt_reg_frac < 1:
        raise UserError(f"--adapt-reg-frac must be in [0, 1), got {cfg.adapt_reg_frac}")
    if cfg.adapt_lr <= 0 or cfg.delta <= 0 or cfg.ratio_delta < 0:
        raise UserError("--adapt-lr and --delta must be positive, --ratio-delta at least 0")


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

    def clear_quickstart() -> None:
        # --force redoes the shared start too; a folder there that no quickstart made is never removed
        if not (force and q.exists()):
            return
        if not any((q / s / n).is_file() for s in ("data", "sft") for n in ("STARTED.json", "DONE.json")):
            raise UserError(
                f"{q} exists and was not made by a quickstart run; pick another --out (nothing was changed)"
            )
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
    sys.exit(main())
