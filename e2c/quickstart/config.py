"""Settings of a quickstart run: the defaults (embedded SmolLM2-135M on a 2-core CPU), the ``--fast`` preset
(tiny test model), which settings each stage depends on, and what each stage needs from earlier ones."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from e2c.generation.hf import resolve_cpu_dtype as resolve_dtype  # noqa: F401 (the quickstart's name)
from e2c.paths import benchmarks_dir

STAGES = (
    "data",
    "baseline",
    "sft",
    "eval_sft",
    "filter",
    "rl",
    "eval_rl",
    "tts",
    "control",
    "eval_control",
    "report",
)

# What each stage reads from earlier stages (their DONE.json must exist): a stage whose inputs are missing
# cannot start, and a stage that runs again makes the stages that read it run again.
REQUIRES: dict[str, tuple[str, ...]] = {
    "data": (),
    "baseline": ("data",),
    "sft": ("data",),
    "eval_sft": ("data", "sft"),
    "filter": ("data", "sft"),
    "rl": ("data", "sft", "filter"),
    "eval_rl": ("data", "rl"),
    "tts": ("data", "sft", "rl"),
    # The equal-compute control matches the RL stage's trained tokens, so it reads the RL run.
    "control": ("data", "sft", "rl"),
    "eval_control": ("data", "control"),
    "report": ("data",),
}
# The report reads every stage's results when they exist, so it is redone when any of them is.
DEPENDS: dict[str, tuple[str, ...]] = {**REQUIRES, "report": STAGES[:-1]}

# Four math-style families and the code family (write a small Python function, graded by its tests in the
# sandbox; docs/data.md). Task i is family i mod 5, so code is a fifth of the generated problems: it replaces a
# share of the mix, the problem count is unchanged. Its chains (~170 embedded tokens at level 1, ~300 at level
# 2, where the length filter keeps about 60%) are as long as the others'.
DEFAULT_FAMILIES = ("small_arithmetic", "arithmetic", "list_ops", "linear_equation", "code")
# Two methods at one budget keep the default run near 30 minutes (--tts-methods and --tts-budgets add more).
DEFAULT_TTS_METHODS = ("self_consistency", "e2c_rp")

# Share of generated problems per split (SFT, RL, eval); the split is a hash of the problem text, so a
# problem is never in two splits. A fifth goes to eval so 200 held-out problems cost little generation.
SPLIT_FRACTIONS = (0.7, 0.1, 0.2)
# SFT checkpoints every this many steps (verl resumes a killed run from the last one).
SFT_SAVE_EVERY = 8
# RL checkpoints every this many steps (and always after the last).
RL_SAVE_EVERY = 4


@dataclass(frozen=True)
class Config:
    """Every knob of a quickstart run (each is a command-line flag; see ``python -m e2c.quickstart --help``)."""

    out: str = "outputs/quickstart"
    model: str = "embedded"
    seed: int = 0
    # data
    families: tuple[str, ...] = DEFAULT_FAMILIES
    max_level: int = 2
    max_chain_tokens: int = 300
    eval_problems: int = 300
    # RL prompts: a pool of this many (the generator is unlimited; the pass-rate filter reads it in order until
    # it has kept enough for the run, so no prompt repeats), from these families and levels (empty / 0: the
    # run's); a family SFT does not move off zero carries no signal and is left out by measurement
    rl_prompts: int = 512
    rl_families: tuple[str, ...] = ()
    rl_max_level: int = 0
    gsm8k_problems: int = 20
    bench_dir: str = field(default_factory=lambda: str(benchmarks_dir()))
    # evaluation (baseline, eval_sft, eval_rl)
    eval_max_tokens: int = 320
    eval_batch: int = 32  # transformers backend: faster than 16 on 2 cores (larger batches gain little)
    # The paper's measure (its eval.sh): Pass@1 as the mean over samples drawn at T 1.0 (avg@k), beside greedy
    # accuracy. 2 samples keep the default run near 45 minutes (a sampled evaluation of 300 problems costs
    # ~6 minutes per 2 samples here); --eval-samples 4 or 8 narrows the interval (docs/results.md).
    eval_samples: int = 2
    eval_temperature: float = 1.0
    dtype: str = "auto"
    # generation backend of eval and TTS: auto = vLLM when installed (scripts/setup_env.sh --vllm), else hf
    backend: str = "auto"
    # SFT
    sft_steps: int = 20
    sft_lr: float = 2e-4
    sft_batch: int = 8
    sft_max_length: int = 512
    # RL prompts: the pass-rate filter (python -m e2c.eval.passrate) keeps the RL prompts the SFT model
    # solves sometimes but not always, sampled as the rollout samples (rl_temperature, rl_response_length)
    filter_k: int = 4
    filter_band: str = "varies"  # the RL reward differs across samples: every kept group has an advantage
    filter_candidates: int = (
        0  # RL prompts the filter samples at most (0: the pool; it stops once it has enough)
    )
    # RL: GRPO stage 2 (departures from the paper's stage 2 are chosen by measurement; docs/quickstart.md, "The RL settings")
    rl_steps: int = 8
    rl_lr: float = 4e-5
    rl_batch: int = 2
    rl_n: int = 8
    rl_response_length: int = 320
    rl_temperature: float = 1.0
    # the overlong penalty's buffer in tokens before rl_response_length (0: no penalty)
    rl_overlong_buffer: int = 0
    rl_plan_bonus: bool = False
    # how the chain's format enters the reward (e2c.rewards.verl_score.REWARD_SHAPES): correct (the evaluation's
    # correctness only), credit, gate (TinyZero's 1 / 0.1 / 0) or levels; the filter grades with the same one
    rl_reward_shape: str = "correct"
    rl_bypass: bool = False  # the rollout's (bf16) log-probs as the old ones: one forward pass less
    rl_dr_grpo: bool = True
    rl_explore_adv_coef: float = 2.0
    # end RL early when the health rules say it is not learning (e2c.health_stop_after; 0: never)
    rl_health_stop_after: int = 5
    # the equal-compute control: SFT from the same SFT model for as many trained tokens as the RL stage
    with_control: bool = False
    # test-time scaling
    tts_problems: int = 20
    tts_budgets: tuple[int, ...] = (4,)
    tts_methods: tuple[str, ...] = DEFAULT_TTS_METHODS
    # the default mix's explorations are at most ~126 embedded tokens and executions ~165 (+ tags); a code
    # chain's execution, its function included, reaches ~200 in the longest kept ones
    tts_explore_budget: int = 140
    tts_execute_budget: int = 200
    # nucleus sampling of explorations and chains. 1.0 (off), not the paper's 0.95: on CPU, vLLM sorts the
    # 49k-token vocabulary of every row at every step for top-p: 271 vs 471 tok/s (bench/vllm_sampling.py)
    tts_top_p: float = 1.0
    fast: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d


# --fast: the same stages on the tiny test model (random weights, 512-token BPE: chains are ~2x longer in its
# tokens), a handful of problems and steps, short generations.
FAST = {
    "out": "outputs/quickstart-fast",
    "model": "tiny",
    # code too, so the short run carries a code problem through every stage (sandbox grading included)
    "families": ("arithmetic", "code"),
    "max_level": 1,
    "max_chain_tokens": 800,
    "eval_problems": 6,
    "rl_prompts": 8,
    "gsm8k_problems": 2,
    "eval_max_tokens": 24,
    "eval_batch": 8,
    "eval_samples": 2,
    "sft_steps": 2,
    "sft_batch": 4,
    "sft_max_length": 1024,
    "filter_k": 2,
    "filter_candidates": 4,
    "filter_band": "all",
    "rl_steps": 1,
    "rl_batch": 2,
    "rl_n": 2,
    "rl_response_length": 24,
    "rl_overlong_buffer": 6,  # exercises the penalty path
    "tts_problems": 2,
    "tts_budgets": (2,),
    "tts_explore_budget": 8,
    "tts_execute_budget": 12,
}

# What an evaluation stage after training depends on (greedy, then sampled: eval_samples at eval_temperature).
EVAL_KEYS = ("seed", "eval_max_tokens", "eval_batch", "eval_samples", "eval_temperature", "dtype", "backend")

# Settings each stage's result depends on: a finished stage is reused only when these are unchanged.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "data": (
        "model",
        "seed",
        "families",
        "max_level",
        "max_chain_tokens",
        "eval_problems",
        "gsm8k_problems",
        "bench_dir",
    ),
    "baseline": ("model", "seed", "eval_max_tokens", "eval_batch", "dtype", "backend"),
    "sft": ("model", "seed", "sft_steps", "sft_lr", "sft_batch", "sft_max_length"),
    "eval_sft": EVAL_KEYS,
    "filter": (
        "seed",
        "filter_k",
        "filter_band",
        "filter_candidates",
        "rl_prompts",
        "rl_families",
        "rl_max_level",
        "rl_steps",
        "rl_batch",
        "rl_temperature",
        "rl_response_length",
        "rl_reward_shape",
        "rl_plan_bonus",
        "dtype",
        "backend",
    ),
    "rl": (
        "seed",
        "rl_steps",
        "rl_lr",
        "rl_batch",
        "rl_n",
        "rl_response_length",
        "rl_temperature",
        "rl_overlong_buffer",
        "rl_plan_bonus",
        "rl_reward_shape",
        "rl_bypass",
        "rl_dr_grpo",
        "rl_explore_adv_coef",
        "rl_health_stop_after",
    ),
    "eval_rl": EVAL_KEYS,
    "control": ("seed", "with_control", "sft_lr", "sft_batch", "sft_max_length"),
    "eval_control": EVAL_KEYS,
    "tts": (
        "seed",
        "tts_problems",
        "tts_budgets",
        "tts_methods",
        "tts_explore_budget",
        "tts_execute_budget",
        "tts_top_p",
        "dtype",
        "backend",
    ),
    "report": (),
}

# A first estimate of each stage's duration in seconds (before its own progress gives a better one): the
# default run measured on a 2-core CPU with vLLM (2026-11-28, the mix with the code family; control from
# 2026-11-24), and the --fast run's order of magnitude.
ETA_SECONDS = {
    False: {
        "data": 18,
        "baseline": 261,
        "sft": 430,
        "eval_sft": 522,
        "filter": 147,
        "rl": 500,
        "eval_rl": 517,
        "tts": 190,
        "control": 300,
        "eval_control": 520,
        "report": 2,
    },
    True: {
        "data": 15,
        "baseline": 20,
        "sft": 60,
        "eval_sft": 20,
        "filter": 20,
        "rl": 100,
        "eval_rl": 20,
        "tts": 20,
        "control": 60,
        "eval_control": 20,
        "report": 10,
    },
}


def stage_settings(cfg: Config, stage: str) -> dict[str, Any]:
    """The settings a stage's result depends on, as JSON-ready values (tuples become lists)."""
    d = cfg.to_dict()
    return {k: d[k] for k in STAGE_KEYS[stage]}


def with_fast(cfg: Config, explicit: set[str]) -> Config:
    """``cfg`` with the ``--fast`` preset applied to every field the user did not set explicitly."""
    return replace(cfg, fast=True, **{k: v for k, v in FAST.items() if k not in explicit})


def field_names() -> list[str]:
    return [f.name for f in fields(Config)]
