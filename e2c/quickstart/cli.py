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
from pathlib import Path
from typing import Any

from e2c.argtypes import (
    EXISTING_DIR,
    MODEL,
    OUTPUT_DIR,
    TEXT,
    ValueType,
    check_value,
    finite,
    positive,
    probability,
    whole,
)
from e2c.cli import DTYPES, ArgumentParser
from e2c.entry import run_main
from e2c.errors import UserError
from e2c.generation import ALIASES as BACKEND_ALIASES
from e2c.generation import BACKENDS
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
from e2c.rewards.shape import REWARD_SHAPES


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
# The value type of every Config field that is a flag with a value: the parser checks a flag with it, and
# validate() checks a whole Config (the --fast preset's values, the claims' shared start) with the same rule.
TYPES: dict[str, ValueType] = {
    "out": OUTPUT_DIR,
    "model": MODEL,
    "seed": whole(0),
    "families": TEXT,
    "max_level": whole(1, 3),
    "max_chain_tokens": whole(1),
    "eval_problems": whole(1),
    "rl_prompts": whole(1),
    "rl_families": TEXT,
    "rl_max_level": whole(0, 3),
    "gsm8k_problems": whole(0),
    "bench_dir": EXISTING_DIR,
    "eval_max_tokens": whole(1),
    "eval_batch": whole(1),
    "eval_samples": whole(0),
    "eval_temperature": positive(),
    "sft_steps": whole(1),
    "sft_lr": positive(),
    "sft_batch": whole(1),
    "sft_max_length": whole(1),
    "filter_k": whole(2),  # a pass rate needs two samples
    "filter_band": TEXT,
    "filter_candidates": whole(0),
    "rl_steps": whole(0),
    "rl_lr": positive(),
    "rl_batch": whole(1),
    "rl_n": whole(1),
    "rl_response_length": whole(1),
    "rl_temperature": positive(),
    "rl_overlong_buffer": whole(0),
    "rl_reward_shape": TEXT,
    "rl_health_stop_after": whole(0),
    "rl_explore_adv_coef": finite(),
    "tts_problems": whole(0),
    "tts_budgets": whole(1),
    "tts_methods": TEXT,
    "tts_explore_budget": whole(1),
    "tts_execute_budget": whole(1),
    "tts_top_p": probability(open_zero=True),
}


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

    def flag(group: Any, key: str, text: str, **kwargs: Any) -> None:
        """``--key`` with the field's value type (None default: only a flag given explicitly is set)."""
        group.add_argument(
            f"--{key.replace('_', '-')}", type=TYPES[key], default=None, help=_help(key, text), **kwargs
        )

    a = p.add_argument
    flag(p, "out", "output folder")
    flag(p, "model", "base model: embedded, tiny, a folder or an HF id")
    a(
        "--fast",
        action="store_true",
        help="the same stages on the tiny test model at tiny sizes (a few minutes)",
    )
    a(
        "--from",
        dest="from_stage",
        default=None,
        type=TEXT,
        metavar="STAGE",
        help=f"redo this stage and every later one; earlier ones are reused ({', '.join(STAGES)}; default: none)",
    )
    a("--force", action="store_true", help="redo every stage, discarding earlier results (default: off)")
    flag(p, "seed", "seed of data, evaluation, training and TTS")
    g = p.add_argument_group("data")
    flag(g, "families", "synthetic task families", nargs="+")
    flag(g, "max_level", "highest task level (1-3)")
    flag(g, "max_chain_tokens", "longest exploration + execution kept, in the model's tokens")
    flag(g, "eval_problems", "held-out synthetic problems")
    flag(
        g,
        "rl_prompts",
        "RL prompts generated (disjoint from SFT and held-out problems); the filter reads them in order until "
        "it has kept enough for the run",
    )
    flag(g, "rl_families", "families of the RL prompts (default: --families)", nargs="+")
    flag(g, "rl_max_level", "highest level of the RL prompts (0: --max-level)")
    flag(g, "gsm8k_problems", "first GSM8K problems of the shared copy (0: none)")
    flag(g, "bench_dir", "folder with gsm8k.jsonl ($E2C_BENCH_DIR)")
    g = p.add_argument_group(
        "evaluation (baseline: greedy; eval_sft, eval_rl, eval_control: greedy, then the paper's avg@k)"
    )
    flag(g, "eval_max_tokens", "new tokens per chain")
    flag(g, "eval_batch", "sequences per forward batch")
    flag(
        g,
        "eval_samples",
        "samples per problem of the sampled evaluation, whose Pass@1 is their mean (avg@k) and which "
        "gives the pass@k curve (0: greedy only)",
    )
    flag(g, "eval_temperature", "temperature of the sampled evaluation (the paper's eval.sh: 1.0)")
    g.add_argument(
        "--dtype",
        default=None,
        choices=DTYPES,
        help=_help("dtype", "inference dtype: auto (bfloat16 on CPUs with native bf16), float32, bfloat16"),
    )
    g.add_argument(
        "--backend",
        default=None,
        choices=[*BACKENDS, *BACKEND_ALIASES],
        help=_help(
            "backend", "generation backend of eval and TTS: auto (vLLM when installed, else hf), vllm, hf"
        ),
    )
    g = p.add_argument_group("SFT (scripts/e2c_sft.sh)")
    flag(g, "sft_steps", "optimizer steps")
    flag(g, "sft_lr", "learning rate")
    flag(g, "sft_batch", "chains per step")
    flag(g, "sft_max_length", "longest row in tokens")
    g = p.add_argument_group("RL prompts (python -m e2c.eval.passrate with the SFT model)")
    flag(g, "filter_k", "samples per candidate prompt (>= 2)")
    flag(g, "filter_band", "pass-rate band kept (see python -m e2c.eval.passrate --help)")
    flag(g, "filter_candidates", "RL prompts sampled by the filter (0: all)")
    g = p.add_argument_group("RL (scripts/e2c_rl.sh --stage 2)")
    flag(g, "rl_steps", "GRPO steps (0: skip RL)")
    flag(g, "rl_lr", "learning rate")
    flag(g, "rl_batch", "prompts per step")
    flag(g, "rl_n", "samples per prompt")
    flag(g, "rl_response_length", "longest sampled response in tokens")
    flag(g, "rl_temperature", "rollout temperature (the paper's stage 2: 1.0)")
    flag(
        g,
        "rl_overlong_buffer",
        "overlong penalty buffer in tokens, at most half the response (0: no penalty)",
    )
    g.add_argument(
        "--rl-plan-bonus",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=_help("rl_plan_bonus", "stage 2's plan-adherence bonus on correct answers"),
    )
    flag(
        g,
        "rl_reward_shape",
        "how the chain's format enters the reward, beside correctness (the pass-rate filter grades with the "
        "same): " + "; ".join(f"{n}: {s.help}" for n, s in REWARD_SHAPES.items()),
        choices=list(REWARD_SHAPES),
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
    flag(
        g,
        "rl_health_stop_after",
        "end RL early when, over this many steps, it had nothing to learn or its chains lost their format "
        "(0: never)",
    )
    flag(g, "rl_explore_adv_coef", "advantage weight of exploration tokens (the paper's stage 2: 2.0)")
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
    flag(g, "tts_problems", "held-out problems (0: skip)")
    flag(g, "tts_budgets", "K/N values", nargs="+")
    flag(g, "tts_methods", "methods", nargs="+")
    flag(g, "tts_explore_budget", "exploration token limit")
    flag(g, "tts_execute_budget", "execution token limit (whole chains: both limits added)")
    flag(g, "tts_top_p", "top-p of sampled explorations and chains (the paper: 0.95; 1.0 is faster on CPU)")
    return p


# Every Config field is a flag of the same name, except the preset switch and the free-form extras.
CONFIG_FLAGS = tuple(f for f in field_names() if f not in ("fast", "extra"))


def config_from_args(args: argparse.Namespace) -> Config:
    """The run's Config: defaults, then the --fast preset, then every flag given explicitly."""
    given = {k: getattr(args, k) for k in CONFIG_FLAGS if getattr(args, k) is not None}
    # paths as the Config keeps them (text); lists as tuples
    given = {
        k: tuple(v) if isinstance(v, list) else str(v) if isinstance(v, Path) else v for k, v in given.items()
    }
    cfg = with_fast(Config(), set(given)) if args.fast else Config()
    cfg = replace(cfg, **given)
    validate(cfg)
    # Resolved now, so each stage records the backend it actually used (auto changes with the install).
    from e2c.generation import pick_backend

    return replace(cfg, backend=pick_backend(cfg.backend))


def validate(cfg: Config) -> None:
    """One UserError line for a setting out of range: every field with a value type (:data:`TYPES`, the
    flags' own rule), then what one value cannot say alone."""
    from e2c.data.synthetic.families import family_names
    from e2c.tts import METHODS

    for key, kind in TYPES.items():
        if key in ("out", "model", "bench_dir"):  # paths: checked where they are used, before any work
            continue
        value = getattr(cfg, key)
        for v in value if isinstance(value, tuple) else (value,):
            check_value(v, kind, f"--{key.replace('_', '-')}")
    for flag_name, names in (("--families", cfg.families), ("--rl-families", cfg.rl_families)):
        bad = [f for f in names if f not in family_names()]
        if bad:
            raise UserError(f"{flag_name}: unknown family {bad[0]!r}; valid: {', '.join(family_names())}")
    bad = [m for m in cfg.tts_methods if m not in METHODS]
    if bad:
        raise UserError(f"--tts-methods: unknown method {bad[0]!r}; valid: {', '.join(METHODS)}")
    from e2c.data.bands import parse_band

    try:
        parse_band(cfg.filter_band)
    except UserError as e:
        raise UserError(f"--filter-band: {e}") from None
    if cfg.dtype not in DTYPES:
        raise UserError(f"--dtype {cfg.dtype!r}; valid: {', '.join(DTYPES)}")
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
    run_main(main)
