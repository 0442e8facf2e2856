"""Settings of a claims run (``bash scripts/claims.sh``): the defaults (embedded SmolLM2-135M on a 2-core CPU),
the ``--fast`` preset (tiny test model), the stages and the settings each depends on."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from e2c.commandline.argtypes import OUTPUT_DIR, Choice, at_least, positive, probability, whole
from e2c.core.paths import default_run_folder
from e2c.quickstart.config import BACKEND, FAMILY
from e2c.quickstart.config import Config as QuickstartConfig
from e2c.quickstart.settings import StageSettings, knob
from e2c.tts import METHODS, methods_with

STAGES = ("start", "weighting", "adapt", "tts", "report")
REQUIRES: dict[str, tuple[str, ...]] = {
    "start": (),
    "weighting": ("start",),
    "tts": ("start",),
    "adapt": ("start",),
    "report": (),
}
# The report reads every experiment, so it is redone when any of them is.
DEPENDS: dict[str, tuple[str, ...]] = {**REQUIRES, "report": STAGES[:-1]}

# The paper's TTS comparison (self-consistency against E2C search; a tree method among them).
DEFAULT_TTS_METHODS = ("self_consistency", "e2c_sc", "e2c_rp", "e2c_react_loop", "e2c_tot")
REFERENCE_METHOD = "self_consistency"
# The method named in the paper's "7x fewer tokens" (AIME24, K=32: 53.3% at 12.4k vs 50.0% at 86.2k).
CLAIM_METHOD = "e2c_react_loop"


FAST: dict[str, Any] = {
    "out": lambda: default_run_folder("claims-fast"),
    "rl_steps": 1,
    # transformers: the tiny model's few short generations take seconds, where vLLM's engine takes ~25 s to
    # start for each of the run's ~12 evaluations (vLLM is the quickstart --fast's own end-to-end path)
    "backend": "hf",
    "weight_seeds": (0, 1),
    "tts_problems": 3,
    "tts_budgets": (1, 2),
    "tts_explore_budget": 8,
    "tts_execute_budget": 12,
    "tts_judge_tokens": 4,
    "tts_tree_step_tokens": 4,
    "adapt_train": 8,
    "adapt_eval": 4,
    "adapt_max_chain_tokens": 800,
    "adapt_eval_max_tokens": 24,
    "adapt_steps": 2,
    "adapt_batch": 4,
}

STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "start": ("fast", "rl_steps", "backend"),
    "weighting": ("weight_coefs", "weight_seeds"),
    "tts": (
        "tts_problems",
        "tts_budgets",
        "tts_methods",
        "tts_nested",
        "tts_explore_budget",
        "tts_execute_budget",
        "tts_judge_tokens",
        "tts_tree_step_tokens",
        "tts_tree_branching",
    ),
    "adapt": (
        "adapt_family",
        "adapt_level",
        "adapt_train",
        "adapt_eval",
        "adapt_max_chain_tokens",
        "adapt_eval_max_tokens",
        "adapt_steps",
        "adapt_batch",
        "adapt_lr",
        "adapt_reg_frac",
    ),
    "report": ("delta", "ratio_delta"),
}


def _tts_methods() -> tuple[str, ...]:

    return tuple(sorted(METHODS))


SECTIONS = {
    "weighting": "claim 1: exploration weighting",
    "tts": "claim 2: test-time scaling (python -m e2c.tts on the RL model)",
    "adapt": "claim 3: exploration-only adaptation to a held-out family",
}


@dataclass(frozen=True)
class ClaimsConfig(StageSettings, preset=FAST, stage_keys=STAGE_KEYS, checked_where_used=("out",)):
    """Every knob of a claims run; each is the command-line flag of its name (``python -m e2c.claims
    --help``), declared here once: its help line, its value type and its section."""

    out: str = knob(
        lambda: default_run_folder("claims"), "output folder ($E2C_BASE_DIR/claims when set)", OUTPUT_DIR
    )
    fast: bool = False
    # the shared start: a quickstart run (data, SFT, pass-rate filter, GRPO stage 2 at rl_explore_adv_coef,
    # seed 0, evaluations) in <out>/quickstart; its RL model is arm (2.0, seed 0) and the TTS/adapt model
    rl_steps: int = knob(4, "GRPO steps of every RL run", whole(1))  # the claims start from an RL model
    # the quickstart's --backend: auto = vLLM when installed, else transformers
    backend: str = knob(
        "auto",
        "generation backend of every evaluation and of TTS: auto (vLLM when installed, else hf), vllm, hf",
        BACKEND,
    )
    # 1. exploration weighting: GRPO stage 2 from the same SFT model per (coefficient, seed)
    weight_coefs: tuple[float, ...] = knob(
        (2.0, 1.0),
        "exploration advantage coefficients (the first is the claim's; 0 masks the exploration out of the "
        "policy gradient)",
        at_least(0),
        "weighting",
    )
    weight_seeds: tuple[int, ...] = knob(
        (0, 1, 2), "seeds per coefficient (data order and rollout sampling)", whole(0), "weighting"
    )
    # smallest accuracy effect that matters (points as a fraction): an interval below it rules it out
    delta: float = knob(
        0.02,
        "smallest accuracy effect that matters, as a fraction (an interval below it rules the effect out)",
        probability(open_zero=True),
        "weighting",
    )
    # 2. test-time scaling on the RL model
    tts_problems: int = knob(100, "held-out problems", whole(1), "tts")
    tts_budgets: tuple[int, ...] = knob((1, 2, 4, 8), "K values", whole(1), "tts")
    tts_methods: tuple[str, ...] = knob(DEFAULT_TTS_METHODS, "methods", Choice(_tts_methods, "method"), "tts")
    tts_nested: bool = knob(
        True,
        f"{' and '.join(methods_with('nestable'))}: smaller budgets read off the largest one's first draws",
        section="tts",
    )
    tts_explore_budget: int = knob(140, "exploration tokens", whole(1), "tts")
    tts_execute_budget: int = knob(200, "execution tokens", whole(1), "tts")
    tts_judge_tokens: int = knob(16, "judge / scorer reply tokens", whole(1), "tts")  # a number
    # e2c_tot: two steps per exploration of tts_explore_budget
    tts_tree_step_tokens: int = knob(70, "e2c_tot step tokens", whole(1), "tts")
    # the toolkit's default 4 costs ~40% more
    tts_tree_branching: int = knob(2, "e2c_tot children per expanded node", whole(1), "tts")
    ratio_delta: float = knob(
        0.5,
        "smallest token saving that matters: a ratio interval below 1 + this rules a saving out",
        at_least(0),
        "tts",
    )
    # 3. exploration-only adaptation to a family held out of SFT and RL
    adapt_family: str = knob("gcd_lcm", "synthetic family (not in SFT/RL)", FAMILY, "adapt")
    adapt_level: int = knob(1, "its level (1-3)", whole(1, 3), "adapt")
    # gcd_lcm chains are longer than the quickstart's (median ~314 embedded tokens at level 1): their own cap,
    # and evaluations on the new family with room for them (old-family evaluations keep the quickstart's)
    adapt_max_chain_tokens: int = knob(
        400, "longest new-family chain kept, in the model's tokens", whole(1), "adapt"
    )
    adapt_eval_max_tokens: int = knob(
        448, "new tokens per chain in the new-family evaluations", whole(1), "adapt"
    )
    # new-domain problems the adaptation trains on (both methods, the same ones)
    adapt_train: int = knob(64, "training problems", whole(1), "adapt")
    # held-out new-domain problems: 200 so that the rule-of-three floor (3 / 200 = 1.5 points) is below delta
    adapt_eval: int = knob(200, "held-out problems", whole(1), "adapt")
    adapt_steps: int = knob(8, "SFT steps per method", whole(1), "adapt")
    adapt_batch: int = knob(8, "rows per step", whole(1), "adapt")
    adapt_lr: float = knob(2e-4, "learning rate", positive(), "adapt")
    # the paper's mix; and < 1 (validate): a share of 1 leaves no exploration-only rows
    adapt_reg_frac: float = knob(
        0.05, "EF-SFT: share of problems kept as full chains", probability(), "adapt"
    )


# First duration estimates in seconds (the default run on a 2-core CPU; --fast on the tiny model): the
# whole stage for start, adapt and report; per RL arm for weighting and per TTS problem for tts, measured on
# 2026-11-25 (docs/results.md, "The paper's claims at laptop scale").
TTS_SECONDS_PER_PROBLEM = 62.0  # five methods at K = 1, 2, 4, 8 with nested budgets, vLLM on 2 cores
ETA_SECONDS = {
    False: {"start": 1380, "weighting": 512, "tts": TTS_SECONDS_PER_PROBLEM, "adapt": 880, "report": 5},
    True: {"start": 200, "weighting": 60, "tts": 20, "adapt": 120, "report": 5},
}


def eta_seconds(cfg: ClaimsConfig) -> dict[str, float]:
    """Each stage's first duration estimate for ``cfg``: the weighting stage scales with its new arms (the
    start's RL run is arm (first coefficient, seed 0)), the TTS stage with its problems."""
    eta = dict(ETA_SECONDS[cfg.fast])
    arms = len(cfg.weight_coefs) * len(cfg.weight_seeds) - 1
    eta["weighting"] = eta["weighting"] * max(arms, 1)
    eta["tts"] = eta["tts"] * cfg.tts_problems
    return eta


def quickstart_config(cfg: ClaimsConfig, out: str) -> QuickstartConfig:
    """The shared start's quickstart settings: the quickstart's defaults (or its ``--fast`` preset) with the
    claims' RL steps, no GSM8K and no TTS (the TTS experiment runs its own)."""
    base = QuickstartConfig()
    if cfg.fast:
        base = base.with_fast()
    return replace(
        base, out=out, rl_steps=cfg.rl_steps, backend=cfg.backend, tts_problems=0, gsm8k_problems=0
    )
