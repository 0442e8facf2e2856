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
import math
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from e2c.cli import ArgumentParser
from e2c.errors import UserError
from e2c.quickstart.config import (
    DEPENDS,
    ETA_SECONDS,
    FAST,
    REQUIRES,
    STAGES,
    Config,
    field_names,
    resolve_dtype,
    stage_settings,
    with_fast,
)
from e2c.quickstart.context import Context, read_done
from e2c.quickstart.data import stage_data
from e2c.quickstart.progress import Reporter
from e2c.quickstart.runner import Pipeline, main_of, out_folder, run_pipeline
from e2c.quickstart.stages import (
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


def stage_report(ctx: Context, rep: Reporter) -> dict[str, Any]:
    """report.md, report.json and the plots."""
    from e2c.quickstart.report import write_report

    res = write_report(ctx)
    rep.say(f"wrote {ctx.out / 'report.md'}", 1.0)
    return res


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
    "report": stage_report,
}


# ------------------------------------------------------------------------------------------------ CLI
def _help(key: str, text: str) -> str:
    """A help line with the default and, where it differs, the --fast default."""
    d = getattr(Config(), key)  # built here: bench_dir follows $E2C_BENCH_DIR / the project folder
    show = lambda v: " ".join(map(str, v)) if isinstance(v, tuple) else str(v)  # noqa: E731
    fast = f"; --fast: {show(FAST[key])}" if key in FAST else ""
    return f"{text} (default: {show(d)}{fast})"


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="scripts/quickstart.sh",
        description="The whole E2C life cycle on one machine: data, baseline eval, SFT, pass-rate filter, GRPO, "
        "evals, TTS, an optional equal-compute control, report.",
        epilog=f"Stages, in order: {', '.join(STAGES)}. Outputs: <out>/<stage>/, <out>/report.md, <out>/report.json.",
    )
    a = p.add_argument
    a("--out", default=None, help=_help("out", "output folder"))
    a("--model", default=None, help=_help("model", "base model: embedded, tiny, a folder or an HF id"))
    a(
        "--fast",
        action="store_true",
        help="the same stages on the tiny test model at tiny sizes (a few minutes)",
    )
    a(
        "--from",
        dest="from_stage",
        default=None,
        metavar="STAGE",
        help=f"redo this stage and every later one; earlier ones are reused ({', '.join(STAGES)}; default: none)",
    )
    a("--force", action="store_true", help="redo every stage, discarding earlier results (default: off)")
    a("--seed", type=int, default=None, help=_help("seed", "seed of data, evaluation, training and TTS"))
    g = p.add_argument_group("data")
    g.add_argument("--families", nargs="+", default=None, help=_help("families", "synthetic task families"))
    g.add_argument("--max-level", type=int, default=None, help=_help("max_level", "highest task level (1-3)"))
    g.add_argument(
        "--max-chain-tokens",
        type=int,
        default=None,
        help=_help("max_chain_tokens", "longest exploration + execution kept, in the model's tokens"),
    )
    g.add_argument(
        "--eval-problems", type=int, default=None, help=_help("eval_problems", "held-out synthetic problems")
    )
    g.add_argument(
        "--gsm8k-problems",
        type=int,
        default=None,
        help=_help("gsm8k_problems", "first GSM8K problems of the shared copy (0: none)"),
    )
    g.add_argument(
        "--bench-dir", default=None, help=_help("bench_dir", "folder with gsm8k.jsonl ($E2C_BENCH_DIR)")
    )
    g = p.add_argument_group("evaluation (baseline, eval_sft, eval_rl: greedy, one sample)")
    g.add_argument(
        "--eval-max-tokens", type=int, default=None, help=_help("eval_max_tokens", "new tokens per chain")
    )
    g.add_argument(
        "--eval-batch", type=int, default=None, help=_help("eval_batch", "sequences per forward batch")
    )
    g.add_argument(
        "--dtype",
        default=None,
        help=_help("dtype", "inference dtype: auto (bfloat16 on CPUs with native bf16), float32, bfloat16"),
    )
    g.add_argument(
        "--backend",
        default=None,
        help=_help(
            "backend", "generation backend of eval and TTS: auto (vLLM when installed, else hf), vllm, hf"
        ),
    )
    g = p.add_argument_group("SFT (scripts/e2c_sft.sh)")
    g.add_argument("--sft-steps", type=int, default=None, help=_help("sft_steps", "optimizer steps"))
    g.add_argument("--sft-lr", type=float, default=None, help=_help("sft_lr", "learning rate"))
    g.add_argument("--sft-batch", type=int, default=None, help=_help("sft_batch", "chains per step"))
    g.add_argument(
        "--sft-max-length", type=int, default=None, help=_help("sft_max_length", "longest row in tokens")
    )
    g = p.add_argument_group("RL prompts (python -m e2c.data.passrate with the SFT model)")
    g.add_argument(
        "--filter-k", type=int, default=None, help=_help("filter_k", "samples per candidate prompt (>= 2)")
    )
    g.add_argument(
        "--filter-band",
        default=None,
        help=_help("filter_band", "pass-rate band kept (see python -m e2c.data.passrate --help)"),
    )
    g.add_argument(
        "--filter-candidates",
        type=int,
        default=None,
        help=_help("filter_candidates", "RL prompts sampled by the filter (0: all)"),
    )
    g = p.add_argument_group("RL (scripts/e2c_rl.sh --stage 2)")
    g.add_argument("--rl-steps", type=int, default=None, help=_help("rl_steps", "GRPO steps (0: skip RL)"))
    g.add_argument("--rl-lr", type=float, default=None, help=_help("rl_lr", "learning rate"))
    g.add_argument("--rl-batch", type=int, default=None, help=_help("rl_batch", "prompts per step"))
    g.add_argument("--rl-n", type=int, default=None, help=_help("rl_n", "samples per prompt"))
    g.add_argument(
        "--rl-response-length",
        type=int,
        default=None,
        help=_help("rl_response_length", "longest sampled response in tokens"),
    )
    g.add_argument(
        "--rl-temperature",
        type=float,
        default=None,
        help=_help("rl_temperature", "rollout temperature (the paper's stage 2: 1.0)"),
    )
    g.add_argument(
        "--rl-overlong-buffer",
        type=int,
        default=None,
        help=_help(
            "rl_overlong_buffer",
            "overlong penalty buffer in tokens, at most half the response (0: no penalty)",
        ),
    )
    g.add_argument(
        "--rl-plan-bonus",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=_help("rl_plan_bonus", "stage 2's plan-adherence bonus on correct answers"),
    )
    g.add_argument(
        "--rl-require-format",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=_help("rl_require_format", "a right answer scores only in a well-formed chain"),
    )
    g.add_argument(
        "--rl-bypass",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=_help("rl_bypass", "take the rollout's log-probs as the old ones (one forward pass less)"),
    )
    g.add_argument(
        "--rl-dr-grpo",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=_help("rl_dr_grpo", "Dr. GRPO advantages (no division by the group's reward std)"),
    )
    g.add_argument(
        "--rl-explore-adv-coef",
        type=float,
        default=None,
        help=_help(
            "rl_explore_adv_coef", "advantage weight of exploration tokens (the paper's stage 2: 2.0)"
        ),
    )
    g = p.add_argument_group(
        "equal-compute control (SFT from the SFT model for the RL stage's trained tokens)"
    )
    g.add_argument(
        "--with-control",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=_help("with_control", "run the control and its evaluation"),
    )
    g = p.add_argument_group("test-time scaling (python -m e2c.tts)")
    g.add_argument(
        "--tts-problems", type=int, default=None, help=_help("tts_problems", "held-out problems (0: skip)")
    )
    g.add_argument(
        "--tts-budgets", type=int, nargs="+", default=None, help=_help("tts_budgets", "K/N values")
    )
    g.add_argument("--tts-methods", nargs="+", default=None, help=_help("tts_methods", "methods"))
    g.add_argument(
        "--tts-explore-budget",
        type=int,
        default=None,
        help=_help("tts_explore_budget", "exploration token limit"),
    )
    g.add_argument(
        "--tts-execute-budget",
        type=int,
        default=None,
        help=_help("tts_execute_budget", "execution token limit (whole chains: both limits added)"),
    )
    g.add_argument(
        "--tts-top-p",
        type=float,
        default=None,
        help=_help(
            "tts_top_p", "top-p of sampled explorations and chains (the paper: 0.95; 1.0 is faster on CPU)"
        ),
    )
    return p


# Every Config field is a flag of the same name, except the preset switch and the free-form extras.
CONFIG_FLAGS = tuple(f for f in field_names() if f not in ("fast", "extra"))


def config_from_args(args: argparse.Namespace) -> Config:
    """The run's Config: defaults, then the --fast preset, then every flag given explicitly."""
    given = {k: getattr(args, k) for k in CONFIG_FLAGS if getattr(args, k) is not None}
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items()}
    cfg = with_fast(Config(), set(given)) if args.fast else Config()
    cfg = replace(cfg, **given)
    validate(cfg)
    # Resolved now, so each stage records the backend it actually used (auto changes with the install).
    from e2c.generation import pick_backend

    return replace(cfg, backend=pick_backend(cfg.backend))


def validate(cfg: Config) -> None:
    """One UserError line for a setting out of range."""
    from e2c.data.synthetic.families import FAMILIES
    from e2c.tts import METHODS

    bad = [f for f in cfg.families if f not in FAMILIES]
    if bad:
        raise UserError(f"--families: unknown family {bad[0]!r}; valid: {', '.join(FAMILIES)}")
    bad = [m for m in cfg.tts_methods if m not in METHODS]
    if bad:
        raise UserError(f"--tts-methods: unknown method {bad[0]!r}; valid: {', '.join(METHODS)}")
    if not 1 <= cfg.max_level <= 3:
        raise UserError(f"--max-level must be 1, 2 or 3, got {cfg.max_level}")
    positive = (
        "max_chain_tokens",
        "eval_problems",
        "eval_max_tokens",
        "eval_batch",
        "sft_steps",
        "sft_batch",
        "sft_max_length",
        "rl_batch",
        "rl_n",
        "rl_response_length",
        "tts_explore_budget",
        "tts_execute_budget",
    )
    for k in positive:
        if getattr(cfg, k) < 1:
            raise UserError(f"--{k.replace('_', '-')} must be at least 1, got {getattr(cfg, k)}")
    for k in ("gsm8k_problems", "rl_steps", "tts_problems"):
        if getattr(cfg, k) < 0:
            raise UserError(f"--{k.replace('_', '-')} must be 0 (skip) or more, got {getattr(cfg, k)}")
    if any(b < 1 for b in cfg.tts_budgets):
        raise UserError(f"--tts-budgets must be positive, got {list(cfg.tts_budgets)}")
    if not 0 < cfg.tts_top_p <= 1:
        raise UserError(f"--tts-top-p must be in (0, 1], got {cfg.tts_top_p}")
    from e2c.data.passrate import parse_band

    try:
        parse_band(cfg.filter_band)
    except UserError as e:
        raise UserError(f"--filter-band: {e}") from None
    if cfg.filter_k < 2:
        raise UserError(f"--filter-k must be at least 2 (a pass rate needs two samples), got {cfg.filter_k}")
    if cfg.filter_candidates < 0:
        raise UserError(f"--filter-candidates must be 0 (all) or more, got {cfg.filter_candidates}")
    if cfg.rl_temperature <= 0:
        raise UserError(f"--rl-temperature must be positive (RL samples), got {cfg.rl_temperature}")
    if cfg.rl_overlong_buffer < 0:
        raise UserError(f"--rl-overlong-buffer must be 0 (off) or more tokens, got {cfg.rl_overlong_buffer}")
    if not math.isfinite(cfg.rl_explore_adv_coef):
        raise UserError(f"--rl-explore-adv-coef must be a finite number, got {cfg.rl_explore_adv_coef}")
    if cfg.sft_lr <= 0 or cfg.rl_lr <= 0:
        raise UserError("--sft-lr and --rl-lr must be positive")
    if cfg.dtype not in ("auto", "float32", "bfloat16", "float16"):
        raise UserError(f"--dtype {cfg.dtype!r}; valid: auto, float32, bfloat16, float16")


# ------------------------------------------------------------------------------------------------ runner
def pipeline(fast: bool) -> Pipeline:
    return Pipeline(
        tool="quickstart",
        stages=STAGES,
        requires=REQUIRES,
        depends=DEPENDS,
        runners=RUNNERS,
        settings=stage_settings,
        eta=ETA_SECONDS[fast],
    )


def run(cfg: Config, from_stage: str | None, force: bool) -> dict[str, Any]:
    """Plan (refusing bad input before anything is changed), then run the stages in order."""
    out = out_folder(cfg.out)
    ctx = Context(cfg, out)
    header = f"model {cfg.model}{' (--fast)' if cfg.fast else ''}, dtype {resolve_dtype(cfg.dtype)}, backend {cfg.backend}"
    run_pipeline(pipeline(cfg.fast), ctx, from_stage, force, header)
    report = read_done(ctx.dir("report")) or {}
    return {
        "report": str(out / "report.md"),
        "json": str(out / "report.json"),
        "accuracy": report.get("headline", {}),
    }


def main(argv: list[str] | None = None) -> int:
    return main_of(argv, build_parser(), config_from_args, run)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
