"""Settings of a quickstart run: the defaults (embedded SmolLM2-135M on a 2-core CPU), the ``--fast`` preset
(tiny test model), which settings each stage depends on, and what each stage needs from earlier ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from e2c.commandline.argtypes import (
    EXISTING_DIR,
    MODEL,
    OUTPUT_DIR,
    Choice,
    finite,
    positive,
    probability,
    whole,
)
from e2c.commandline.parsing import DTYPES
from e2c.core.paths import benchmarks_dir, default_run_folder
from e2c.data.bands import BAND
from e2c.data.synthetic.families import family_names
from e2c.generation import ALIASES as BACKEND_ALIASES
from e2c.generation import BACKENDS
from e2c.generation.hf import resolve_cpu_dtype as resolve_dtype  # noqa: F401 (the quickstart's name)
from e2c.quickstart.settings import StageSettings, knob
from e2c.rewards.shape import REWARD_SHAPES
from e2c.tts import METHODS

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
# The families whose RL prompts carry signal after a short SFT: from 60 and 120 SFT steps the sampled pass
# rate was off zero only in these (docs/results.md, "RL that learns"), and RL over all five families at lr
# 4e-5 lost 9.8 points of avg@4. The RL prompts come from the run's families among these by default.
RL_SIGNAL_FAMILIES = ("small_arithmetic", "code")
# Two methods at one budget keep the default run near 30 minutes (--tts-methods and --tts-budgets add more).
DEFAULT_TTS_METHODS = ("self_consistency", "e2c_rp")

# Share of generated problems per split (SFT, RL, eval); the split is a hash of the problem text, so a
# problem is never in two splits. A fifth goes to eval so 200 held-out problems cost little generation.
SPLIT_FRACTIONS = (0.7, 0.1, 0.2)
# SFT checkpoints every this many steps (verl resumes a killed run from the last one).
SFT_SAVE_EVERY = 8
# RL checkpoints every this many steps (and always after the last).
RL_SAVE_EVERY = 4


# --fast: the same stages on the tiny test model (random weights, 512-token BPE: chains are ~2x longer in its
# tokens), a handful of problems and steps, short generations.
FAST = {
    "out": lambda: default_run_folder("quickstart-fast"),
    "model": "tiny",
    # code too, so the short run carries a code problem through every stage (sandbox grading included)
    "families": ("arithmetic", "code"),
    "max_level": 1,
    "max_chain_tokens": 800,
    "eval_problems": 6,
    "rl_prompts": 8,
    "rl_families": ("arithmetic", "code"),
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


def _families() -> tuple[str, ...]:

    return tuple(family_names())


def _tts_methods() -> tuple[str, ...]:

    return tuple(METHODS)


FAMILY = Choice(_families, "family")
BACKEND = Choice((*BACKENDS, *BACKEND_ALIASES), "backend")
SECTIONS = {
    "data": "data",
    "eval": "evaluation (baseline: greedy; eval_sft, eval_rl, eval_control: greedy, then the paper's avg@k)",
    "sft": "SFT (scripts/e2c_sft.sh)",
    "filter": "RL prompts (python -m e2c.rl.passrate with the SFT model)",
    "rl": "RL (scripts/e2c_rl.sh --stage 2)",
    "control": "equal-compute control (SFT from the SFT model for the RL stage's trained tokens)",
    "tts": "test-time scaling (python -m e2c.tts)",
}


@dataclass(frozen=True)
class Config(
    StageSettings, preset=FAST, stage_keys=STAGE_KEYS, checked_where_used=("out", "model", "bench_dir")
):
    """Every knob of a quickstart run; each is the command-line flag of its name (``python -m e2c.quickstart
    --help``), declared here once: its help line, its value type and its section."""

    out: str = knob(
        lambda: default_run_folder("quickstart"),
        "output folder ($E2C_BASE_DIR/quickstart when set)",
        OUTPUT_DIR,
    )
    model: str = knob("embedded", "base model: embedded, tiny, a folder or an HF id", MODEL)
    seed: int = knob(0, "seed of data, evaluation, training and TTS", whole(0))
    # data
    families: tuple[str, ...] = knob(DEFAULT_FAMILIES, "synthetic task families", FAMILY, "data")
    max_level: int = knob(2, "highest task level (1-3)", whole(1, 3), "data")
    max_chain_tokens: int = knob(
        300, "longest exploration + execution kept, in the model's tokens", whole(1), "data"
    )
    eval_problems: int = knob(300, "held-out synthetic problems", whole(1), "data")
    # RL prompts: a pool of this many (the generator is unlimited; the pass-rate filter reads it in order until
    # it has kept enough for the run, so no prompt repeats), from these families and levels (empty / 0: the
    # run's); a family SFT does not move off zero carries no signal and is left out by measurement
    rl_prompts: int = knob(
        512,
        "RL prompts generated (disjoint from SFT and held-out problems); the filter reads them in order until "
        "it has kept enough for the run",
        whole(1),
        "data",
    )
    rl_families: tuple[str, ...] = knob(
        (),
        "families of the RL prompts (default: those of --families among "
        + ", ".join(RL_SIGNAL_FAMILIES)
        + "; else --families)",
        FAMILY,
        "data",
    )
    rl_max_level: int = knob(0, "highest level of the RL prompts (0: --max-level)", whole(0, 3), "data")
    gsm8k_problems: int = knob(20, "first GSM8K problems of the shared copy (0: none)", whole(0), "data")
    bench_dir: str = knob(
        lambda: str(benchmarks_dir()), "folder with gsm8k.jsonl ($E2C_BENCH_DIR)", EXISTING_DIR, "data"
    )
    # evaluation (baseline, eval_sft, eval_rl)
    eval_max_tokens: int = knob(320, "new tokens per chain", whole(1), "eval")
    # transformers backend: faster than 16 on 2 cores (larger batches gain little)
    eval_batch: int = knob(32, "sequences per forward batch", whole(1), "eval")
    # The paper's measure (its eval.sh): Pass@1 as the mean over samples drawn at T 1.0 (avg@k), beside greedy
    # accuracy. 2 samples keep the default run near 45 minutes (a sampled evaluation of 300 problems costs
    # ~6 minutes per 2 samples here); --eval-samples 4 or 8 narrows the interval (docs/results.md).
    eval_samples: int = knob(
        2,
        "samples per problem of the sampled evaluation, whose Pass@1 is their mean (avg@k) and which gives the "
        "pass@k curve (0: greedy only)",
        whole(0),
        "eval",
    )
    eval_temperature: float = knob(
        1.0, "temperature of the sampled evaluation (the paper's eval.sh: 1.0)", positive(), "eval"
    )
    dtype: str = knob(
        "auto",
        "inference dtype: auto (bfloat16 on CPUs with native bf16), float32, bfloat16, float16",
        Choice(DTYPES, "dtype"),
        "eval",
    )
    # generation backend of eval and TTS: auto = vLLM when installed (scripts/setup_env.sh --vllm), else hf
    backend: str = knob(
        "auto",
        "generation backend of eval and TTS: auto (vLLM when installed, else hf), vllm, hf",
        BACKEND,
        "eval",
    )
    # SFT
    sft_steps: int = knob(20, "optimizer steps", whole(1), "sft")
    sft_lr: float = knob(2e-4, "learning rate", positive(), "sft")
    sft_batch: int = knob(8, "chains per step", whole(1), "sft")
    sft_max_length: int = knob(512, "longest row in tokens", whole(1), "sft")
    # RL prompts: the pass-rate filter (python -m e2c.rl.passrate) keeps the RL prompts the SFT model
    # solves sometimes but not always, sampled as the rollout samples (rl_temperature, rl_response_length)
    filter_k: int = knob(
        4, "samples per candidate prompt (>= 2)", whole(2), "filter"
    )  # a pass rate needs two
    # varies: the RL reward differs across samples, so every kept group has an advantage
    filter_band: str = knob(
        "varies", "pass-rate band kept (see python -m e2c.rl.passrate --help)", BAND, "filter"
    )
    # RL prompts the filter samples at most (0: the pool; it stops once it has enough)
    filter_candidates: int = knob(0, "RL prompts sampled by the filter (0: all)", whole(0), "filter")
    # RL: GRPO stage 2 (departures from the paper's stage 2 are chosen by measurement; docs/quickstart.md, "The
    # RL settings")
    rl_steps: int = knob(8, "GRPO steps (0: skip RL)", whole(0), "rl")
    rl_lr: float = knob(2e-5, "learning rate", positive(), "rl")
    rl_batch: int = knob(2, "prompts per step", whole(1), "rl")
    rl_n: int = knob(8, "samples per prompt", whole(1), "rl")
    rl_response_length: int = knob(320, "longest sampled response in tokens", whole(1), "rl")
    rl_temperature: float = knob(1.0, "rollout temperature (the paper's stage 2: 1.0)", positive(), "rl")
    # the overlong penalty's buffer in tokens before rl_response_length (0: no penalty)
    rl_overlong_buffer: int = knob(
        0, "overlong penalty buffer in tokens, at most half the response (0: no penalty)", whole(0), "rl"
    )
    rl_plan_bonus: bool = knob(False, "stage 2's plan-adherence bonus on correct answers", section="rl")
    # how the chain's format enters the reward (e2c.rewards.verl_score.REWARD_SHAPES): correct (the evaluation's
    # correctness only), credit, gate (TinyZero's 1 / 0.1 / 0) or levels; the filter grades with the same one
    rl_reward_shape: str = knob(
        "correct",
        "how the chain's format enters the reward, beside correctness (the pass-rate filter grades with the "
        "same): " + "; ".join(f"{n}: {sh.help}" for n, sh in REWARD_SHAPES.items()),
        Choice(tuple(REWARD_SHAPES), "reward shape"),
        "rl",
    )
    rl_bypass: bool = knob(
        False, "take the rollout's log-probs as the old ones (one forward pass less)", section="rl"
    )
    rl_dr_grpo: bool = knob(True, "Dr. GRPO advantages (no division by the group's reward std)", section="rl")
    rl_explore_adv_coef: float = knob(
        2.0, "advantage weight of exploration tokens (the paper's stage 2: 2.0)", finite(), "rl"
    )
    # end RL early when the health rules say it is not learning (e2c.health_stop_after; 0: never)
    rl_health_stop_after: int = knob(
        5,
        "end RL early when, over this many steps, it had nothing to learn or its chains lost their format "
        "(0: never)",
        whole(0),
        "rl",
    )
    # the equal-compute control: SFT from the same SFT model for as many trained tokens as the RL stage
    with_control: bool = knob(False, "run the control and its evaluation", section="control")
    # test-time scaling
    tts_problems: int = knob(20, "held-out problems (0: skip)", whole(0), "tts")
    tts_budgets: tuple[int, ...] = knob((4,), "K/N values", whole(1), "tts")
    tts_methods: tuple[str, ...] = knob(DEFAULT_TTS_METHODS, "methods", Choice(_tts_methods, "method"), "tts")
    # the default mix's explorations are at most ~126 embedded tokens and executions ~165 (+ tags); a code
    # chain's execution, its function included, reaches ~200 in the longest kept ones
    tts_explore_budget: int = knob(140, "exploration token limit", whole(1), "tts")
    tts_execute_budget: int = knob(
        200, "execution token limit (whole chains: both limits added)", whole(1), "tts"
    )
    # nucleus sampling of explorations and chains. 1.0 (off), not the paper's 0.95: on CPU, vLLM sorts the
    # 49k-token vocabulary of every row at every step for top-p: 271 vs 471 tok/s (bench/vllm_sampling.py)
    tts_top_p: float = knob(
        1.0,
        "top-p of sampled explorations and chains (the paper: 0.95; 1.0 is faster on CPU)",
        probability(open_zero=True),
        "tts",
    )
    fast: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


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
