"""The pass-rate filter's settings (:class:`FilterConfig`) and its files (:class:`PassRateFiles`).
More: docs/data.md, "Learnable RL prompts: the pass-rate filter".
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.chain import FORMATS
from e2c.commandline.argtypes import (
    ANY_TEXT,
    MODEL,
    positive,
    probability,
    whole,
)
from e2c.commandline.flags import flag_values, setting
from e2c.core.models import default_subfolder
from e2c.core.paths import configs_dir
from e2c.data.bands import (
    BAND,
    DEFAULT_BAND,
    band_choices,
)
from e2c.rewards.shape import DEFAULT_REWARD_SHAPE, REWARD_SHAPES

DEFAULT_K = 8
DEFAULT_MODEL = "models/checkpoints/sft/final"  # the RL configs' start model
DEFAULT_INPUT = "data/processed/rl/e2c_rl_train.parquet"
# the RL rollout's temperature (actor_rollout_ref.rollout.temperature in configs/e2c_common.yaml)
DEFAULT_TEMPERATURE = 1.0
FALLBACK_RESPONSE_LENGTH = 8192  # data.max_response_length of the paper's RL configs
HF_ROWS = 32  # transformers backend: sequences decoded at once (the quickstart's best batch on 2 cores)
VLLM_ROWS = 2048  # vLLM: sequences per call, as eval's chunks
# Settings that change what is sampled and how it is graded: a resumed run must use the same ones.
SAMPLE_FIELDS = (
    "model",
    "subfolder",
    "format",
    "k",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "reward_shape",
    "plan_bonus",
)
# What a sample setting a samples file does not record is compared as: None, which no run asks for, so a
# file whose lines hold no rewards is refused as any other change of settings is.
RECORDED_BEFORE: dict[str, Any] = {"reward_shape": None, "plan_bonus": None}


def rl_response_length() -> int:
    """The RL run's response length: ``data.max_response_length`` of ``configs/e2c_common.yaml`` (the
    settings every GRPO and DAPO stage starts from), so the filter and the run agree by default; 8,192 (the
    paper's) when the config cannot be read (a package installed outside a checkout)."""
    try:
        import yaml

        data = yaml.safe_load((configs_dir() / "e2c_common.yaml").read_text(encoding="utf-8"))
        value = data["data"]["max_response_length"]
        return int(value) if isinstance(value, int) and value > 0 else FALLBACK_RESPONSE_LENGTH
    except Exception:  # any unreadable config: the paper's value
        return FALLBACK_RESPONSE_LENGTH


def _format_names() -> tuple[str, ...]:

    return tuple(FORMATS)


def default_batch_size(backend: str, k: int) -> int:
    """Prompts per call: about 2,048 sequences on vLLM, 32 on transformers, at least one prompt."""
    return max(1, (VLLM_ROWS if backend == "vllm" else HF_ROWS) // k)


@dataclass
class FilterConfig:
    """Settings of one filter run. A field with a flag in its metadata is a flag of ``python -m
    e2c.rl.passrate`` (:func:`e2c.commandline.flags.add_setting_flags`): its spelling, ``--help`` line, type and
    command-line default live here, and the parser checks it; the run trusts a config built from them."""

    model: str = field(
        metadata=setting(
            "the model RL starts from: folder, HF id, 'embedded' or 'tiny'",
            flag="--model",
            flag_help="the model RL starts from: folder, HF id, 'embedded' or 'tiny' "
            f"(default: {DEFAULT_MODEL}, the RL configs' start model)",
            flag_default=None,  # main() names the default; a missing one is then the model's own error line
            value=MODEL,
        )
    )
    subfolder: str | None = field(
        default=None,
        metadata=setting(
            "subfolder of the model (default: 8B for the released checkpoint, else none)",
            flag="--subfolder",
            value=ANY_TEXT,  # '' means none (not the release's 8B), as in eval and TTS
        ),
    )
    format: str = field(
        default="e2c",  # the RL run's chain format (e2c.rollout.format): its opener is prefilled
        metadata=setting(
            "chain format of the RL run (default: e2c)",
            flag="--format",
            choices=_format_names,
            choices_label="chain formats",
        ),
    )
    k: int = field(
        default=DEFAULT_K,
        metadata=setting(
            f"samples per prompt, at least 2: one gives pass rates of 0 or 1 only (default: {DEFAULT_K})",
            flag="--k",
            value=whole(2),
        ),
    )
    band: str = field(
        default=DEFAULT_BAND,
        metadata=setting(
            f"pass rates to keep: {band_choices()} (default: {DEFAULT_BAND})", flag="--band", value=BAND
        ),
    )
    temperature: float = field(
        default=DEFAULT_TEMPERATURE,
        metadata=setting(
            f"sampling temperature, > 0: 0 would be greedy, k copies of one answer (default: "
            f"{DEFAULT_TEMPERATURE:g}, the RL rollout's)",
            flag="--temperature",
            value=positive(),
        ),
    )
    top_p: float = field(
        default=1.0,
        metadata=setting(
            "nucleus sampling mass (default: 1.0, the RL rollout's)",
            flag="--top-p",
            value=probability(open_zero=True),
        ),
    )
    max_tokens: int = field(
        default=FALLBACK_RESPONSE_LENGTH,
        metadata=setting(
            "new tokens per sample; give the RL run's data.max_response_length (default: "
            "configs/e2c_common.yaml's; a sample cut there is graded as the rollout's would be)",
            flag="--max-tokens",
            flag_default=lambda: rl_response_length(),
            value=whole(1),
        ),
    )
    seed: int = field(
        default=0, metadata=setting("random seed of the sampling (default: 0)", flag="--seed", value=whole(0))
    )
    # the RL run's reward (e2c.rewards.shape and the plan bonus): each sample gets the reward RL would give
    # it, so the band "varies" keeps exactly the prompts whose GRPO groups have an advantage
    reward_shape: str = field(
        default=DEFAULT_REWARD_SHAPE,
        metadata=setting(
            "the RL run's reward shape, which every sample is graded with: "
            + "; ".join(f"{n}: {sh.help}" for n, sh in REWARD_SHAPES.items())
            + f" (default: {DEFAULT_REWARD_SHAPE})",
            flag="--reward-shape",
            choices=tuple(REWARD_SHAPES),
            choices_label="reward shapes",
        ),
    )
    plan_bonus: bool = field(
        default=False,
        metadata=setting("grade with the RL run's plan-adherence bonus (default: off)", flag="--plan-bonus"),
    )
    batch_size: int = field(
        default=4,  # prompts per generation call and per resume unit
        metadata=setting(
            f"prompts per generation call, each call one unit of resume (default: {VLLM_ROWS} // k on vllm, "
            f"{HF_ROWS} // k on hf, whose rows of a call decode together)",
            flag="--batch-size",
            flag_default=None,  # the run derives it from the backend (default_batch_size)
            value=whole(1),
        ),
    )
    limit: int | None = field(
        default=None,
        metadata=setting("first N prompts of the input only (default: all)", flag="--limit", value=whole(1)),
    )
    # stop once this many prompts are in the band (the input read in order): a run needing N prompts samples
    # about N / (share in band) of them, not the whole pool
    keep: int | None = field(
        default=None,
        metadata=setting(
            "stop once N prompts are in the band, reading the input in order (default: read every prompt)",
            flag="--keep",
            value=whole(1),
        ),
    )
    grader_threads: int = 4  # grading runs in threads; the grader's symbolic checks in its own processes
    extra: dict[str, Any] = field(default_factory=dict)  # recorded in the report, not compared

    @classmethod
    def from_flags(cls, args: argparse.Namespace, backend: str) -> FilterConfig:
        """The run's settings from parsed flags: the subfolder and the batch size resolved for the model and
        the backend."""

        values = flag_values(args, cls)
        return cls(
            **{
                **values,
                "subfolder": default_subfolder(values["model"], values["subfolder"]),
                "batch_size": values["batch_size"] or default_batch_size(backend, values["k"]),
            }
        )

    def sample_settings(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in SAMPLE_FIELDS}

    def reward_kwargs(self) -> dict[str, Any]:
        """The RL reward function's keywords this filter grades with."""
        return {**REWARD_SHAPES[self.reward_shape].reward_kwargs(), "plan_bonus": self.plan_bonus}


@dataclass(frozen=True)
class PassRateFiles:
    """The files of one run, named after its output parquet ``X.parquet``."""

    output: Path  # X.parquet: the kept rows
    samples: Path  # X.passrate.jsonl: per-prompt results, appended as batches finish (resume)
    report: Path  # X.passrate.json
    plot: Path  # X.passrate.png
    lock: Path  # X.passrate.lock: held by the filter that writes these files (e2c.core.run_folder.hold_lock)

    @classmethod
    def of(cls, output: str | Path) -> PassRateFiles:
        """The files beside ``output``.

        >>> PassRateFiles.of("rl/train.filtered.parquet").report.as_posix()
        'rl/train.filtered.passrate.json'
        """
        out = Path(output)
        stem = out.with_suffix("")
        return cls(
            out,
            Path(f"{stem}.passrate.jsonl"),
            Path(f"{stem}.passrate.json"),
            Path(f"{stem}.passrate.png"),
            Path(f"{stem}.passrate.lock"),
        )


def default_output(input_path: str | Path) -> Path:
    """``X.filtered.parquet`` beside the input ``X.parquet``.

    >>> default_output("data/processed/rl/e2c_rl_train.parquet").as_posix()
    'data/processed/rl/e2c_rl_train.filtered.parquet'
    """
    p = Path(input_path)
    return p.with_name(f"{p.with_suffix('').name}.filtered.parquet")
