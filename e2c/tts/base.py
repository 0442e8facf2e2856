"""Shared pieces of the test-time-scaling methods: settings, token metering, the method registry, voting.

Every method receives a :class:`Meter`, a generator wrapper that counts every token of every call it forwards,
so a method cannot spend tokens that are not reported; votes merge answers with the grader, as maj@k does.
Programs (an answer kind that ``runs_programs``) are only extracted while a method searches
(:meth:`Context.grade`), run on the public tests when a vote or the ReAct loop asks (:meth:`Context.public_run`),
and vote by that behaviour (:func:`weighted_vote`); only the chosen program is graded on every test
(:meth:`Context.final`). Sandbox seconds are metered beside tokens (:attr:`MethodResult.sandbox_s`).
More: docs/test-time-scaling.md, "Token metering, votes, outputs".
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from e2c.chain import E2C, ChainFormat
from e2c.chain.budget import TTS_NAMES, PhaseBudget
from e2c.commandline.argtypes import ANY_TEXT, TEXT, at_least, probability, whole
from e2c.commandline.flags import setting
from e2c.data.registry import Record, options_of, question_text
from e2c.generation.base import DEFAULT_SAMPLING, Completion, Generator, Sampling, Usage, derive_seed
from e2c.generation.chains import chain_prompts
from e2c.rewards import code_judge
from e2c.rewards.code_tests import CodeTestsError, parse_tests
from e2c.rewards.grader import GradeResult, grade
from e2c.rewards.kinds import find_kind, prompt_format
from e2c.rewards.vote import answer_classes, behaviour_classes, majority_class, program_key
from e2c.sandbox import given_or_env

if TYPE_CHECKING:
    from e2c.rewards.code_judge import CodeVerdict
    from e2c.rewards.code_tests import CodeTests
    from e2c.sandbox import Sandbox


@dataclass
class TTSSettings:
    """Sampling and budget settings shared by every method (defaults: the E2C paper's TTS set-up).

    Each field declares the values it takes (``setting(..., value=...)``, :mod:`e2c.commandline.argtypes`): a config
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
        """The two-phase chain's budget (e2c.chain.budget's one rule): an exploration of ``explore_budget``, then an
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
    # Sandbox wall seconds (programs only; 0 for other kinds): the public-test runs of the search plus the
    # chosen program's grading on every test. ``sandbox_by_role`` splits them: select (public runs for
    # votes and acceptance), feedback (the ReAct loop's reruns of a failed public test), grade (the
    # chosen program), prefix (grading the choices of smaller budgets for nested budgets; not in the total).
    sandbox_s: float = 0.0
    sandbox_by_role: dict[str, float] = field(default_factory=dict)

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
    # Where programs run: the command's sandbox (e2c.sandbox.use); None: the one $E2C_SANDBOX names.
    sandbox: Sandbox | None = None
    # Sandbox seconds spent while searching, by use (select, feedback); the final grading is the result's.
    sandbox_by_role: Counter = field(default_factory=Counter)
    # How the last vote over programs was taken (written to the record as details["code_vote"]).
    vote_basis: dict[str, Any] | None = None
    # program text -> its verdict on the public tests; response -> its grade on every test. A program is
    # run once per problem however many candidates or votes hold it.
    _public: dict[str, CodeVerdict] = field(default_factory=dict, repr=False)
    _final: dict[str, GradeResult] = field(default_factory=dict, repr=False)

    @property
    def question(self) -> str:
        return question_text(self.record)

    @property
    def runs_programs(self) -> bool:
        """The problem's answers are programs, graded by running them (the ``code`` kind)."""
        spec = find_kind(self.record.kind)
        return spec is not None and spec.runs_programs

    def programs(self) -> Sandbox:
        """The sandbox programs run in (:attr:`sandbox`, else :func:`e2c.sandbox.from_env`)."""
        return given_or_env(self.sandbox)

    @cached_property
    def code_tests(self) -> CodeTests | None:
        """The problem's tests (every one, hidden included: only :meth:`final` grades against them); None
        for a problem that is not code or whose tests do not parse."""
        if not self.runs_programs:
            return None

        try:
            return parse_tests(self.record.answer)
        except (CodeTestsError, RecursionError):
            return None

    @cached_property
    def public_tests(self) -> CodeTests | None:
        """The tests a search may run: the public ones only (None when the problem shows none)."""
        tests = self.code_tests
        return tests.only(tests.public) if tests is not None and tests.public else None

    def public_run(self, program: str | None) -> CodeVerdict | None:
        """``program`` run on the public tests (never a hidden one), once per program text; its sandbox
        seconds count as ``select``. None when there is no program or no public test."""
        tests = self.public_tests
        if program is None or tests is None:
            return None
        if program not in self._public:
            # Looked up on the module at call time, so the judge a test wraps is the one called.
            verdict = code_judge.judge(program, tests, self.programs())
            self.sandbox_by_role["select"] += verdict.seconds
            self._public[program] = verdict
        return self._public[program]

    def vote_key(self, cand: Candidate) -> tuple[str, ...] | None:
        """A program's vote (:func:`e2c.rewards.vote.program_key`): its behaviour on the public tests, or
        its text when it cannot run there (no public tests, too long, a sandbox failure)."""
        program = cand.graded.extracted
        verdict = self.public_run(program)
        ran = verdict is not None and verdict.status == "ok"
        return program_key(program, verdict.behaviour if ran else None)

    def program_classes(self, cands: Sequence[Candidate]) -> list[int | None]:
        """The vote class of each candidate program (equal behaviour on the public tests: one class);
        runs every program that has not run yet, then notes how the vote was taken in :attr:`vote_basis`."""
        keys = [self.vote_key(c) for c in cands]
        public = self.public_tests
        if public is None:
            self.vote_basis = {"by": "text", "why": "the problem has no public tests"}
        else:
            unrun = sum(k is not None and k[0] != "run" for k in keys)
            self.vote_basis = {"by": "public_tests", "tests": len(public.tests)}
            if unrun:  # too long to run, or the sandbox failed: these voted by their text
                self.vote_basis["by_text"] = unrun
        classes = behaviour_classes(keys)
        self.vote_basis["classes"] = len({c for c in classes if c is not None})
        return classes

    def final(self, cand: Candidate) -> Candidate:
        """The candidate graded on every test (programs; any other kind is graded already and returned as
        it is). Once per response: a later choice of the same one costs no second run."""
        if not self.runs_programs:
            return cand
        if cand.response not in self._final:
            self._final[cand.response] = grade(
                cand.response,
                self.record.answer,
                self.record.kind,
                fmt=self.fmt,
                prefilled=self.fmt.prefill_assistant,
                sandbox=self.sandbox,
            )
        return replace(cand, graded=self._final[cand.response])

    def final_seconds(self, chosen: Candidate | None) -> tuple[float, float]:
        """(sandbox seconds of grading ``chosen`` in full, of grading every other response in full)."""
        mine = other = 0.0
        for response, g in self._final.items():
            if chosen is not None and response == chosen.response:
                mine += g.sandbox_s or 0.0
            else:
                other += g.sandbox_s or 0.0
        return mine, other

    def seed(self, *keys: Any) -> int | None:
        return derive_seed(self.settings.seed, self.record.id, *keys)

    def options(self) -> dict[str, str] | None:

        return options_of(self.record)

    def grade(self, response: str, plan: str | None = None, weight: float = 1.0) -> Candidate:
        """A candidate from a response. A program is not graded here: with no reference the grader parses
        the chain and extracts the program but runs nothing (it has no tests), so a search never runs a
        hidden test; :meth:`final` grades the chosen one."""
        # Responses continue the prefilled tag: one that writes it again has it twice.
        g = grade(
            response,
            None if self.runs_programs else self.record.answer,
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


def weighted_vote(cands: Sequence[Candidate], ctx: Context | None = None) -> Candidate | None:
    """The first candidate of the answer class with the largest total weight.

    Answers are grouped by the grader's equivalence, right and wrong alike (``3``, ``3.0`` and ``x=3`` are
    one answer), exactly as maj@k groups them (:func:`e2c.rewards.vote.answer_classes`); ties go to the
    class seen first; candidates without an answer do not vote (``None`` if none has one).

    Programs (``ctx`` is then required) are grouped by their behaviour on the public tests instead
    (:meth:`Context.program_classes`: equal outputs on every public input, one vote), never by a grade,
    which would need the hidden tests; the chosen candidate is still ungraded (:meth:`Context.final`).
    """
    if not cands:
        return None
    spec = find_kind(cands[0].graded.kind)
    if spec is not None and spec.runs_programs:
        if ctx is None:
            raise ValueError(
                "programs vote by their behaviour on the public tests: pass the method's Context"
            )
        classes = ctx.program_classes(cands)
    else:
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
    sandbox: Sandbox | None = None,
) -> MethodResult:
    """Run one registered method on one problem at one budget, metering every token (``sandbox``: where
    programs run, :attr:`Context.sandbox`)."""
    if name not in METHODS:
        raise KeyError(f"unknown TTS method {name!r}; valid: {', '.join(sorted(METHODS))}")
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    meter = Meter(gen)
    # A program is asked for in a fenced block (the kind's own suffix), not as a boxed value.
    ctx = Context(meter, record, settings, prompt_format(fmt, record.kind), embed, sandbox)
    t0 = time.perf_counter()
    chosen, details = METHODS[name](ctx, budget)
    if chosen is not None:
        chosen = ctx.final(chosen)  # a program is graded on every test only now, once chosen
    secs = time.perf_counter() - t0
    if ctx.vote_basis is not None:
        details = {**details, "code_vote": ctx.vote_basis}
    graded_s, prefix_s = ctx.final_seconds(chosen)
    by_role = {**ctx.sandbox_by_role, "grade": graded_s, "prefix": prefix_s}
    by_role = {k: round(v, 4) for k, v in by_role.items() if v}
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
        sandbox_s=round(sum(v for k, v in by_role.items() if k != "prefix"), 4),
        sandbox_by_role=by_role,
    )
