"""verl's custom reward function entry.

Point verl at it with ``reward.custom_reward_function.path=<this file>`` and
``reward.custom_reward_function.name=compute_score``. verl decodes responses before calling it; keep
the E2C tags in that decode (they are special tokens, so ``skip_special_tokens=True`` would remove
them and every chain would parse as untagged).

Code rows (answer kind ``code``: the last fenced program runs on the row's tests in the sandbox,
:mod:`e2c.sandbox`) are rewarded by ``code_reward`` (:data:`CODE_REWARDS`): ``all`` (the default) scores 1 when
every test passes, ``fraction`` scores ``passed / total`` (verl's ``prime_code`` offers the same continuous
reward). A failure of the sandbox itself is an error, never a wrong answer: see :func:`compute_score`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from e2c.rewards.grader import PLAN_FLOOR, GradeResult, grade
from e2c.rewards.kinds import DEFAULT_KIND, find_kind, get_kind
from e2c.rewards.shape import shaped_score
from e2c.rewards.source_kinds import SOURCE_KINDS

CODE_REWARDS = ("all", "fraction")
"""How a code answer is rewarded: ``all``, 1 when every test passes (as LiveCodeBench and DeepCoder count),
else 0; ``fraction``, the share of tests passed (a denser signal where full passes are rare)."""
DEFAULT_CODE_REWARD = "all"
CODE_REWARD_KEY = "reward.custom_reward_function.reward_kwargs.code_reward"
"""Where a run's code reward is set (the launcher's ``--code-reward``): verl passes these keywords to the
reward function, and they win over a row's ``extra_info.code_reward``."""


def kind_for_source(data_source: str | None, extra_info: Mapping[str, Any] | None = None) -> str:
    """The answer kind of a sample: ``extra_info["kind"]`` when it names one, else the kind of the first
    data-source fragment of :data:`~e2c.rewards.source_kinds.SOURCE_KINDS` (the registry's non-default
    kinds) found in ``data_source`` (``mmlu_anatomy``, ``openlifescienceai/medmcqa``), else ``math``."""
    if extra_info and find_kind(extra_info.get("kind")) is not None:
        return str(extra_info["kind"])
    src = (data_source or "").lower()
    return next((kind for frag, kind in SOURCE_KINDS.items() if frag in src), DEFAULT_KIND)


def runs_programs(data_source: str | None, extra_info: Mapping[str, Any] | None = None) -> bool:
    """Whether a row's answer kind runs its answer in the sandbox (``code``): the reward manager scores such
    rows on threads of their own, bounded by the sandbox (:func:`e2c.rl.reward.code_pool`).

    >>> runs_programs("livecodebench"), runs_programs("x", {"kind": "code"}), runs_programs("gsm8k")
    (True, True, False)
    """
    return get_kind(kind_for_source(data_source, extra_info)).runs_programs


def code_reward_mode(value: Any, where: str = "code_reward") -> str:
    """A ``code_reward`` setting checked where it enters (the launcher's ``--code-reward``, the reward
    function's config, a row's ``extra_info``): one of :data:`CODE_REWARDS`; None or empty is the default.
    Anything else is a ``ValueError`` naming the choices (a data or config bug, not model output).

    >>> code_reward_mode(None), code_reward_mode("fraction")
    ('all', 'fraction')
    """
    if value is None or (isinstance(value, str) and not value):
        return DEFAULT_CODE_REWARD
    if isinstance(value, str) and value in CODE_REWARDS:
        return value
    raise ValueError(f"{where} {value!r} is not a code reward; valid: {', '.join(CODE_REWARDS)}")


def share_passed(res: GradeResult) -> float:
    """The share of a program's tests that passed; 0 when none ran (no program, too long, a sandbox failure)."""
    if not res.tests_total or res.tests_passed is None:
        return 0.0
    return res.tests_passed / res.tests_total


def sandbox_failed(res: GradeResult) -> bool:
    """The sandbox itself failed on this answer (the program's kind runs programs and its check said
    ``error``): an error, never a wrong answer. A grader bug (also reason ``error``) names its exception."""
    return res.reason == "error" and res.check == "error" and get_kind(res.kind).runs_programs


def code_score(res: GradeResult, mode: str, plan_bonus: bool) -> tuple[float, float]:
    """A code answer's ``(score, correctness term)`` under ``mode`` (:data:`CODE_REWARDS`). ``all``: the
    grader's own score and correctness. ``fraction``: the share of tests passed, scaled like a correct answer
    with ``plan_bonus`` (``PLAN_FLOOR + (1 - PLAN_FLOOR) * adherence``, the grader's rule), so that passing
    every test scores what ``all`` scores."""
    if mode != "fraction":
        return res.score, float(res.correct)
    frac = share_passed(res)
    scale = 1.0
    if plan_bonus and res.plan_adherence is not None:
        scale = PLAN_FLOOR + (1.0 - PLAN_FLOOR) * res.plan_adherence
    return frac * scale, frac


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
    :func:`e2c.rewards.grade`), ``timeout`` (seconds) and ``code_reward`` (:data:`CODE_REWARDS`; keyword
    arguments, verl's ``reward.custom_reward_function.reward_kwargs``, win over a row's ``extra_info``). Never
    raises on model output; an unknown ``code_reward`` is a ``ValueError``.

    ``require_format`` (off by default, as the paper): a correct answer counts only in a well-formed chain
    (both phases, each tag once and in order, closed). Then ``acc`` is that gated correctness, ``answer_correct``
    the answer alone (the evaluation's correctness) and ``correct_malformed`` 1.0 for a right answer in a
    malformed chain, which scores ``malformed_credit`` (default 0) of a right answer's score. A well-formed
    chain with a wrong answer earns ``format_credit``. The named shapes (:data:`REWARD_SHAPES`) set these three
    keywords together (:func:`shaped_score`). Why: a small policy sampled at T 0.7 writes a third of its chains with
    fragments of the tags' spelling instead of the tag tokens and still gets some answers right; rewarding
    those taught the quickstart's GRPO to drop the tags (held-out format 99% -> 0%, docs/results.md, "RL at this scale").

    Every row returns the same keys (verl stacks each key over the batch, so a mixed math and code batch needs
    them all): ``correct_reward`` is the reward's correctness term (``acc``, or under ``code_reward=fraction``
    the share of tests passed; the reward manager's ``plan_reward`` is ``score`` minus it); ``code`` is 1.0 for
    a row whose answer runs in the sandbox, with ``tests_fraction`` (tests passed / run), ``sandbox_s`` (the
    sandbox's wall seconds) and ``sandbox_error`` (0.0 on other rows).

    A sandbox failure (a server that does not answer, a missing tool) says nothing about the answer; verl
    has no "skip", so such a sample scores as if it earned no correctness (0, plus any ``format_credit`` its
    chain earns) and is marked ``error`` and ``sandbox_error`` 1.0: :mod:`e2c.rl.health` leaves it out of the
    accuracies and counts it (``health/sandbox_errors``).
    """
    info = dict(extra_info or {})
    info.update(kwargs)
    mode = code_reward_mode(info.get("code_reward"))
    res = grade(
        solution_str,
        ground_truth,
        kind_for_source(data_source, info),
        # Not `a or b`: parquet lists arrive as numpy arrays, whose truth value raises.
        options=info["options"] if info.get("options") is not None else info.get("choices"),
        plan_bonus=bool(info.get("plan_bonus", False)),
        prefilled=None if info.get("prefilled") is None else bool(info["prefilled"]),
        **({"timeout": float(info["timeout"])} if "timeout" in info else {}),
        # "all" needs only the first failing test: the rest are not run (tests_fraction is a lower bound).
        stop_on_fail=mode == "all",
    )
    well_formed = res.chain_status == "ok"
    gated = bool(info.get("require_format", False)) and not well_formed
    code = get_kind(res.kind).runs_programs
    score, correct_term = (
        code_score(res, mode, bool(info.get("plan_bonus", False)))
        if code
        else (res.score, float(res.correct))
    )
    kept = float(info.get("malformed_credit", 0.0) or 0.0) if gated else 1.0
    return {
        "score": shaped_score(score, res.correct, well_formed, info),
        "acc": float(res.correct and not gated),
        "correct_reward": kept * correct_term,
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
        "code": float(code),
        "tests_fraction": share_passed(res) if code else 0.0,
        "sandbox_s": float(res.sandbox_s or 0.0),
        "sandbox_error": float(sandbox_failed(res)),
    }
