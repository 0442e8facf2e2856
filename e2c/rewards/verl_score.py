"""verl's custom reward function entry.

Point verl at it with ``reward.custom_reward_function.path=<this file>`` and
``reward.custom_reward_function.name=compute_score``. verl decodes responses before calling it; keep
the E2C tags in that decode (they are special tokens, so ``skip_special_tokens=True`` would remove
them and every chain would parse as untagged).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from e2c.rewards.grader import grade
from e2c.rewards.kinds import DEFAULT_KIND, find_kind
from e2c.rewards.source_kinds import SOURCE_KINDS


def kind_for_source(data_source: str | None, extra_info: Mapping[str, Any] | None = None) -> str:
    """The answer kind of a sample: ``extra_info["kind"]`` when it names one, else the kind of the first
    data-source fragment of :data:`~e2c.rewards.source_kinds.SOURCE_KINDS` (the registry's non-default
    kinds) found in ``data_source`` (``mmlu_anatomy``, ``openlifescienceai/medmcqa``), else ``math``."""
    if extra_info and find_kind(extra_info.get("kind")) is not None:
        return str(extra_info["kind"])
    src = (data_source or "").lower()
    return next((kind for frag, kind in SOURCE_KINDS.items() if frag in src), DEFAULT_KIND)


def compute_score(
    data_source: str | None,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl reward: a dict whose ``score`` is the reward and whose other keys become metrics.

    ``extra_info`` (or keyword arguments) may carry ``kind`` (a name of :mod:`e2c.rewards.kinds`), ``options`` or
    ``choices`` (MCQ), ``plan_bonus`` (bool), ``require_format`` (bool), ``prefilled`` (bool; see
    :func:`e2c.rewards.grade`) and ``timeout`` (seconds). Never raises on model output.

    ``require_format`` (off by default, as the paper): a correct answer counts only in a well-formed chain
    (both phases, each tag once and in order, closed). Then ``acc`` is that gated correctness (the reward's
    correctness term), ``answer_correct`` the answer alone and ``correct_malformed`` 1.0 for a right answer in
    a malformed chain, which scores 0. Why: a small policy sampled at T 0.7 writes a third of its chains with
    fragments of the tags' spelling instead of the tag tokens and still gets some answers right; rewarding
    those taught the quickstart's GRPO to drop the tags (held-out format 99% -> 0%, docs/results.md, "RL at this scale").
    """
    info = dict(extra_info or {})
    info.update(kwargs)
    res = grade(
        solution_str,
        ground_truth,
        kind_for_source(data_source, info),
        # Not `a or b`: parquet lists arrive as numpy arrays, whose truth value raises.
        options=info["options"] if info.get("options") is not None else info.get("choices"),
        plan_bonus=bool(info.get("plan_bonus", False)),
        prefilled=None if info.get("prefilled") is None else bool(info["prefilled"]),
        **({"timeout": float(info["timeout"])} if "timeout" in info else {}),
    )
    well_formed = res.chain_status == "ok"
    gated = bool(info.get("require_format", False)) and not well_formed
    credit = float(info.get("format_credit", 0.0) or 0.0) if well_formed and not res.correct else 0.0
    return {
        "score": (0.0 if gated else res.score) + credit,
        "acc": float(res.correct and not gated),
        "answer_correct": float(res.correct),
        "correct_malformed": float(res.correct and not well_formed),
        "pred": res.extracted or "",
        "format": res.format_score,
        "well_formed": float(well_formed),
        # the parse status word (ok, no_tags, truncated_execution, ...): in verl's validation dumps; its
        # metrics skip strings
        "chain_status": res.chain_status,
        "no_answer": float(res.reason == "no_answer"),
        "timeout": float(res.reason == "timeout"),
        # A reference the grader cannot read scores 0 like a wrong answer: make it visible in the metrics.
        "unparseable_gold": float(res.reason == "unparseable_gold"),
        "error": float(res.reason == "error"),
    }
