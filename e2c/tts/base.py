"""Shared pieces of the test-time-scaling methods: settings, token metering, the method registry, voting.

Every method receives a :class:`Meter`, a generator wrapper that counts every token of every call it
forwards (explorations, executions, judge and refinement calls alike), so a method cannot spend tokens
that are not reported. Votes merge answers with the project's grader, exactly as maj@k does in
:mod:`e2c.eval.metrics` (equivalent answers vote together, however written, whether right or wrong).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from e2c.argtypes import ANY_TEXT, TEXT, at_least, probability, whole
from e2c.budget import TTS_NAMES, PhaseBudget
from e2c.chain import E2C, ChainFormat
from e2c.data.registry import Record, question_text
from e2c.flags import setting
from e2c.generation.base import DEFAULT_SAMPLING, Completion, Generator, Sampling, Usage, derive_seed
from e2c.generation.chains import chain_prompts
from e2c.rewards.grader import GradeResult, grade
from e2c.rewards.vote import answer_classes, majority_class


@dataclass
class TTSSettings:
    """Sampling and budget settings shared by every method (defaults: the E2C paper's TTS set-up).

    Each field declares the values it takes (``setting(..., value=...)``, :mod:`e2c.argtypes`): a config
    file's ``settings`` and ``--set key=value`` are checked with those types
    (:func:`e2c.tts.run.settings_from`), the way the command line checks its flags."""

    explore_budget: int = field(default=512, metadata=setting("one exploration (plan)", value=whole(1)))
    execute_budget: int = field(default=16384, metadata=setting("one execution", value=whole(1)))
    cot_tokens: int = field(
        default=16384,
        metadata=setting(
            "one full chain in a single call (greedy_cot, self_consistency, forest leaves)", value=whole(1)
        ),
    )
    judge_tokens: int = field(
        default=256, metadata=setting("a judge's or a node scorer's reply", value=whole(1))
    )
    refine_tokens: int = field(default=512, metadata=setting("a refined plan", value=whole(1)))
    temperature: float = field(default=0.9, metadata=setting("sampling temperature", value=at_least(0)))
    top_p: float = field(
        default=0.95, metadata=setting("nucleus sampling mass", value=probability(open_zero=True))
    )
    execute_temperature: float = field(
        default=0.0, metadata=setting("executions' temperature (0: greedy)", value=at_least(0))
    )
    react_rounds: int = field(
        default=3, metadata=setting("refinement rounds of the ReAct loop", value=whole(0))
    )
    clusters: int = field(default=3, metadata=setting("semantic clusters", value=whole(1)))
    embedder: str = field(
        default="all-MiniLM-L6-v2",
        metadata=setting("sentence-transformers model (name, folder or installed package)", value=TEXT),
    )
    tree_branching: int = field(
        default=4, metadata=setting("children per expanded node (tree_of_thoughts, e2c_tot)", value=whole(1))
    )
    tree_beam: int = field(default=2, metadata=setting("nodes kept per level after scoring", value=whole(1)))
    tree_step_tokens: int = field(
        default=128, metadata=setting("tokens per thought / exploration prefix step", value=whole(1))
    )
    forest_trees: int = field(default=2, metadata=setting("trees in a forest", value=whole(1)))
    seed: int = field(default=0, metadata=setting("random seed", value=whole(0)))
    # Written for the model at the start of every exploration and whole chain (steers models never trained
    # on the format, e.g. "I need to make a step-by-step plan.\n1."); part of the plan, not counted.
    opener: str = field(
        default="", metadata=setting("text written at the start of every exploration", value=ANY_TEXT)
    )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def phase_budget(self) -> PhaseBudget:
        """The two-phase chain's budget (e2c.budget's one rule): an exploration of ``explore_budget``, then an
        execution of ``execute_budget``; ``cot_tokens`` is the whole-chain limit of one-call methods."""
        return PhaseBudget(self.cot_tokens, self.explore_budget, self.execute_budget, names=TTS_NAMES)


# Old spellings of TTS settings (a config file or ``--set``) -> the knob's one name, the snake_case of the
# canonical flag (``--explore-budget``) that eval and the demos use for the same budget.
SETTING_ALIASES: dict[str, str] = {"explore_tokens": "explore_budget", "execute_tokens": "execute_budget"}


def canonical_settings(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """``mapping`` with old setting names (:data:`SETTING_ALIASES`) renamed; ValueError when a mapping gives
    a setting under both names.

    >>> canonical_settings({"explore_tokens": 256, "seed": 1})
    {'explore_budget': 256, 'seed': 1}
    """
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = SETTING_ALIASES.get(key, key)
        if name in out:
            raise ValueError(f"TTS setting {name} is given twice (also as {key}, its old name); keep one")
        out[name] = value
    return out


class Meter:
    """A :class:`Generator` that forwards to another one and counts what passes through it.

    ``usage`` counts generated tokens (every call) and prompt tokens (once per sequence, as vLLM bills);
    ``by_role`` splits generated tokens by the ``role`` the method passes (explore, execute, judge, ...).
    """

    def __init__(self, gen: Generator) -> None:
        self.gen = gen
        self.name = gen.name
        self.tokenizer = gen.tokenizer
        self.usage = Usage()
        self.by_role: Counter = Counter()

    def generate(
        self, prompts: Sequence[str], sampling: Sampling = DEFAULT_SAMPLING, role: str = "other"
    ) -> list[list[Completion]]:
        before = self.gen.usage.prompt_tokens
        outs = self.gen.generate(prompts, sampling)
        # The backend already tokenized the prompts and tallied them: take its count rather than encoding
        # every prompt (long ones, in tree searches) a second time.
        self.usage.add([0] * len(prompts), outs)
        self.usage.prompt_tokens += self.gen.usage.prompt_tokens - before
        self.by_role[role] += sum(c.num_tokens for row in outs for c in row)
        return outs


@dataclass
class Candidate:
    """One executed answer: the response it came from, the plan behind it (if any) and its grade."""

    response: str
    plan: str | None
    graded: GradeResult
    weight: float = 1.0
    # Generated tokens behind this candidate, by role (its plan's and its execution's, or its whole chain's).
    tokens: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> str | None:
        """The answer as written (whitespace collapsed), for logs; votes group by :func:`weighted_vote`."""
        a = self.graded.extracted
        return None if a is None or not str(a).strip() else " ".join(str(a).split())


@dataclass
class MethodResult:
    """What one method did on one problem at one budget."""

    method: str
    budget: int
    problem_id: str
    correct: bool
    answer: str | None
    generated_tokens: int
    prompt_tokens: int
    calls: int
    seconds: float
    tokens_by_role: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    response: str | None = None  # the chosen answer's chain (its execution, for plan-then-execute methods)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Context:
    """Everything a method needs for one problem."""

    gen: Meter
    record: Record
    settings: TTSSettings
    fmt: ChainFormat = E2C
    embed: Callable[[list[str]], Any] | None = None  # texts -> (n, d) array, for semantic clustering

    @property
    def question(self) -> str:
        return question_text(self.record)

    def seed(self, *keys: Any) -> int | None:
        return derive_seed(self.settings.seed, self.record.id, *keys)

    def options(self) -> dict[str, str] | None:
        from e2c.data.registry import options_of

        return options_of(self.record)

    def grade(self, response: str, plan: str | None = None, weight: float = 1.0) -> Candidate:
        # Responses continue the prefilled tag: one that writes it again has it twice.
        g = grade(
            response,
            self.record.answer,
            self.record.kind,
            options=self.options(),
            fmt=self.fmt,
            prefilled=self.fmt.prefill_assistant,
        )
        return Candidate(response, plan, g, weight)

    def chain_prompt(self) -> str:
        """The chat prompt ending with the prefilled exploration tag (no ``opener``)."""
        return chain_prompts(self.gen.tokenizer, [self.question], self.fmt)[0]

    def base_prompt(self) -> str:
        """The prompt explorations and whole chains continue: the chain prompt, then the ``opener``."""
        return self.chain_prompt() + self.settings.opener

    def chat(self, message: str) -> str:
        """A plain one-turn chat prompt (judge, scorer and refinement calls: no chain format)."""
        return self.gen.tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
        )


MethodFn = Callable[[Context, int], tuple[Candidate | None, dict[str, Any]]]


@dataclass(frozen=True)
class MethodTraits:
    """What the runner and the command line need to know about a method, declared where it registers
    (:func:`register`), so that a new method is one decorated function and no list elsewhere names it.
    Every trait defaults to off: a method that only explores and executes declares nothing."""

    # Generates whole chains of up to ``cot_tokens`` in one call (else an exploration of up to
    # ``explore_budget``, then an execution of up to ``execute_budget``): the context check sizes its
    # longest generation by this.
    chains: bool = False
    # Its result does not depend on the budget (greedy_cot: K/N = 1 always): the runner computes it once
    # per problem and reuses it at every budget.
    budget_free: bool = False
    # Its budget-K run holds the budget-k result of every k < K (its first k independent draws, written to
    # ``details["prefix"]`` by :func:`e2c.tts.methods.prefix_votes`): with ``--nested-budgets`` the runner
    # runs the largest budget only and reads the others off it.
    nestable: bool = False
    # Needs ``Context.embed`` (the sentence-transformers model ``TTSSettings.embedder``): the entry point
    # loads it only when a selected method asks for it.
    needs_embedder: bool = False
    # Its steps are exploration prefixes (e2c_tot's tree steps): reports count those tokens as exploration.
    tree_explores: bool = False

    @property
    def explore_roles(self) -> tuple[str, ...]:
        """The token roles (:class:`Meter`'s) a report counts as exploration for this method."""
        return ("explore", "tree") if self.tree_explores else ("explore",)


METHODS: dict[str, MethodFn] = {}
# The traits of every registered method, keyed as METHODS and written only by register().
TRAITS: dict[str, MethodTraits] = {}


def register(name: str, **flags: bool) -> Callable[[MethodFn], MethodFn]:
    """Add a method to the registry under ``name``; ``flags`` are its :class:`MethodTraits` (all off when
    not given; a misspelt one is a TypeError at import).

    >>> @register("doc_example", budget_free=True)
    ... def doc_example(ctx, budget):
    ...     return None, {}
    >>> traits("doc_example").budget_free, traits("doc_example").chains
    (True, False)
    >>> _ = METHODS.pop("doc_example"), TRAITS.pop("doc_example")
    """
    method_traits = MethodTraits(**flags)

    def deco(fn: MethodFn) -> MethodFn:
        if name in METHODS:
            raise ValueError(f"TTS method {name!r} is registered twice")
        METHODS[name] = fn
        TRAITS[name] = method_traits
        return fn

    return deco


def traits(name: str) -> MethodTraits:
    """The traits ``name`` registered with; a function put into :data:`METHODS` by hand (not through
    :func:`register`) has the defaults, so the runner treats it as a plain explore-then-execute method."""
    return TRAITS.get(name, MethodTraits())


def methods_with(trait: str, names: Sequence[str] | None = None) -> list[str]:
    """The methods of ``names`` (default: every registered one, in registration order) whose boolean
    ``trait`` (a :class:`MethodTraits` field name) is on; ValueError naming the valid traits otherwise."""
    valid = [f.name for f in fields(MethodTraits)]
    if trait not in valid:
        raise ValueError(f"unknown TTS method trait {trait!r}; valid: {', '.join(valid)}")
    return [n for n in (METHODS if names is None else names) if getattr(traits(n), trait)]


def weighted_vote(cands: Sequence[Candidate]) -> Candidate | None:
    """The first candidate of the answer class with the largest total weight.

    Answers are grouped by the grader's equivalence, right and wrong alike (``3``, ``3.0`` and ``x=3`` are
    one answer), exactly as maj@k groups them (:func:`e2c.rewards.vote.answer_classes`); ties go to the
    class seen first; candidates without an answer do not vote (``None`` if none has one).
    """
    if not cands:
        return None
    classes = answer_classes(
        [c.graded.extracted for c in cands], [c.graded.correct for c in cands], kind=cands[0].graded.kind
    )
    best = majority_class(classes, [c.weight for c in cands])
    if best is None:
        return None
    return next(c for c, k in zip(cands, classes, strict=True) if k == best)


def run_method(
    name: str,
    gen: Generator,
    record: Record,
    budget: int,
    settings: TTSSettings,
    fmt: ChainFormat = E2C,
    embed: Callable[[list[str]], Any] | None = None,
) -> MethodResult:
    """Run one registered method on one problem at one budget, metering every token."""
    if name not in METHODS:
        raise KeyError(f"unknown TTS method {name!r}; valid: {', '.join(sorted(METHODS))}")
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    meter = Meter(gen)
    ctx = Context(meter, record, settings, fmt, embed)
    t0 = time.perf_counter()
    chosen, details = METHODS[name](ctx, budget)
    secs = time.perf_counter() - t0
    return MethodResult(
        method=name,
        budget=budget,
        problem_id=str(record.id),
        correct=bool(chosen is not None and chosen.graded.correct),
        answer=None if chosen is None else chosen.graded.extracted,
        generated_tokens=meter.usage.generated_tokens,
        prompt_tokens=meter.usage.prompt_tokens,
        calls=meter.usage.calls,
        seconds=round(secs, 3),
        tokens_by_role=dict(meter.by_role),
        details=details,
        response=None if chosen is None else chosen.response,
    )
