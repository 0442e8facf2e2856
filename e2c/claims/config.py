"""Settings of a claims run (``bash scripts/claims.sh``): the defaults (embedded SmolLM2-135M on a 2-core CPU),
the ``--fast`` preset (tiny test model), the stages and the settings each depends on."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from e2c.quickstart.config import FAST as QUICKSTART_FAST
from e2c.quickstart.config import Config as QuickstartConfig

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


@dataclass(frozen=True)
class ClaimsConfig:
    """Every knob of a claims run (each is a command-line flag; see ``python -m e2c.claims --help``)."""

    out: str = "outputs/claims"
    fast: bool = False
    # the shared start: a quickstart run (data, SFT, pass-rate filter, GRPO stage 2 at rl_explore_adv_coef,
    # seed 0, evaluations) in <out>/quickstart; its RL model is arm (2.0, seed 0) and the TTS/adapt model
    rl_steps: int = 4
    # generation backend of every evaluation and of TTS (the quickstart's --backend): auto = vLLM when
    # installed, else transformers
    backend: str = "auto"
    # 1. exploration weighting: GRPO stage 2 from the same SFT model per (coefficient, seed)
    weight_coefs: tuple[float, ...] = (2.0, 1.0)
    weight_seeds: tuple[int, ...] = (0, 1, 2)
    # smallest accuracy effect that matters (points as a fraction): an interval below it rules it out
    delta: float = 0.02
    # 2. test-time scaling on the RL model
    tts_problems: int = 100
    tts_budgets: tuple[int, ...] = (1, 2, 4, 8)
    tts_methods: tuple[str, ...] = DEFAULT_TTS_METHODS
    tts_nested: bool = True  # self_consistency / e2c_sc: budgets below the largest read off its first draws
    tts_explore_budget: int = 140
    tts_execute_budget: int = 200
    tts_judge_tokens: int = 16  # the judge's and tree scorer's reply: a number
    tts_tree_step_tokens: int = 70  # e2c_tot: two steps per exploration of tts_explore_budget
    tts_tree_branching: int = (
        2  # e2c_tot: children per expanded node (the toolkit's default 4 costs ~40% more)
    )
    # smallest token saving that matters: a ratio interval below 1 + this rules a saving out
    ratio_delta: float = 0.5
    # 3. exploration-only adaptation to a family held out of SFT and RL
    adapt_family: str = "gcd_lcm"
    adapt_level: int = 1
    # gcd_lcm chains are longer than the quickstart's (median ~314 embedded tokens at level 1): their own cap,
    # and evaluations on the new family with room for them (old-family evaluations keep the quickstart's)
    adapt_max_chain_tokens: int = 400
    adapt_eval_max_tokens: int = 448
    adapt_train: int = 64  # new-domain problems the adaptation trains on (both methods, the same ones)
    # held-out new-domain problems: 200 so that the rule-of-three floor (3 / 200 = 1.5 points) is below delta
    adapt_eval: int = 200
    adapt_steps: int = 8
    adapt_batch: int = 8
    adapt_lr: float = 2e-4
    adapt_reg_frac: float = 0.05  # EF-SFT: share of the problems kept as full chains (the paper's mix)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d


FAST: dict[str, Any] = {
    "out": "outputs/claims-fast",
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


def stage_settings(cfg: ClaimsConfig, stage: str) -> dict[str, Any]:
    d = cfg.to_dict()
    return {k: d[k] for k in STAGE_KEYS[stage]}


def with_fast(cfg: ClaimsConfig, explicit: set[str]) -> ClaimsConfig:
    return replace(cfg, fast=True, **{k: v for k, v in FAST.items() if k not in explicit})


def field_names() -> list[str]:
    return [f.name for f in fields(ClaimsConfig)]


def quickstart_config(cfg: ClaimsConfig, out: str) -> QuickstartConfig:
    """The shared start's quickstart settings: the quickstart's defaults (or its ``--fast`` preset) with the
    claims' RL steps, no GSM8K and no TTS (the TTS experiment runs its own)."""
    base = QuickstartConfig()
    if cfg.fast:
        base = replace(base, fast=True, **QUICKSTART_FAST)
    return replace(
        base, out=out, rl_steps=cfg.rl_steps, backend=cfg.backend, tts_problems=0, gsm8k_problems=0
    )
