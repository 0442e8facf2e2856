"""The ten test-time-scaling methods, registered by name in :data:`e2c.tts.base.METHODS`.

Each is a function ``(ctx, budget) -> (chosen candidate or None, details)``; ``budget`` is the paper's K/N.
Every generation goes through ``ctx.gen`` (a :class:`~e2c.tts.base.Meter`), so all tokens are counted; ``role``
labels each call. Executions continue the chain after what the chain format writes after an exploration
(:meth:`e2c.chain.ChainFormat.close_exploration`) and are decoded greedily (``execute_temperature``). On code
problems methods vote by behaviour on the public tests, and no hidden test runs before a method has chosen. A
method declares its traits where it registers (``@register("name", chains=True, ...)``), so adding one is one
decorated function here.
More: docs/test-time-scaling.md, "Methods"; docs/extending.md, "Test-time-scaling methods".
"""

from __future__ import annotations

import json
import random
import re
from typing import Any, NamedTuple

from e2c.chain import E2C, THINK
from e2c.generation.base import Sampling
from e2c.rewards import code_judge
from e2c.rewards.extract import last_boxed
from e2c.tts.base import Candidate, Context, register, weighted_vote

# ------------------------------------------------------------------------------------------- building blocks


def sample_full(ctx: Context, n: int, temperature: float, tag: str) -> list[Candidate]:
    """``n`` whole chains in one call each of at most ``cot_tokens`` (the plain CoT / full-chain mode)."""
    s = ctx.settings
    sampling = Sampling(n, s.cot_tokens, temperature, s.top_p, ctx.fmt.stop_strings("full"), ctx.seed(tag))
    outs = ctx.gen.generate([ctx.base_prompt()], sampling, role="full")[0]
    cands = [ctx.grade(s.opener + c.text_with_stop) for c in outs]
    for cand, c in zip(cands, outs, strict=True):
        cand.tokens = {"full": c.num_tokens}
    return cands


def explore_counted(ctx: Context, k: int, tag: str = "explore") -> tuple[list[str], list[int]]:
    """``k`` sampled explorations (plans), each cut at the exploration boundary or ``explore_budget``, and
    the generated tokens of each."""
    s = ctx.settings
    stop = ctx.fmt.stop_strings("explore")
    sampling = Sampling(k, s.phase_budget.explore_limit, s.temperature, s.top_p, stop, ctx.seed(tag))
    outs = ctx.gen.generate([ctx.base_prompt()], sampling, role="explore")[0]
    return [s.opener + c.text for c in outs], [c.num_tokens for c in outs]


def explore(ctx: Context, k: int, tag: str = "explore") -> list[str]:
    """``k`` sampled explorations (plans), each cut at the exploration boundary or ``explore_budget``."""
    return explore_counted(ctx, k, tag)[0]


def execute(
    ctx: Context, plans: list[str], tag: str = "execute", plan_tokens: list[int] | None = None
) -> list[Candidate]:
    """Execute each plan (one call with every plan as a prompt; greedy by default). ``plan_tokens`` (the
    plans' generated tokens) go into each candidate's ``tokens`` beside its execution's."""
    if not plans:
        return []
    s, fmt = ctx.settings, ctx.fmt
    prompts = [fmt.render_prompt(ctx.gen.tokenizer, ctx.question, "execute", p) for p in plans]
    stop = fmt.stop_strings("execute")
    sampling = Sampling(
        1, s.phase_budget.execute_limit(), s.execute_temperature, s.top_p, stop, ctx.seed(tag)
    )
    outs = ctx.gen.generate(prompts, sampling, role="execute")
    cands = []
    for p, row in zip(plans, outs, strict=True):
        # Graded as the whole response after the prefilled opener: plan, boundary, execution.
        head = fmt.assistant_prefix("execute", p)[len(fmt.assistant_prefix("full")) :]
        cands.append(ctx.grade(head + row[0].text_with_stop, plan=p))
        cands[-1].tokens = {"execute": row[0].num_tokens}
    for cand, n in zip(cands, plan_tokens or [], strict=False):
        cand.tokens = {"explore": n, **cand.tokens}
    return cands


def prefix_votes(cands: list[Candidate], ctx: Context | None = None) -> list[dict[str, Any]]:
    """For every k from 1 to ``len(cands)``, the vote of the first k candidates: ``{"k", "correct",
    "answer", "tokens_by_role", "sandbox_s"}`` (tokens summed over those k). The candidates are independent
    draws, so the first k of K are a sample of size k: a runner can read budget k off a budget-K run (nested
    budgets).

    Programs need ``ctx``: all K run on the public tests first, then each prefix's choice is graded on every
    test (:meth:`~e2c.tts.base.Context.final`, once per program); ``sandbox_s`` is what budget k alone would
    have spent: its k programs' public runs plus the grading of its choice (0 for other kinds)."""
    out: list[dict[str, Any]] = []
    tokens: dict[str, int] = {}
    programs = ctx is not None and ctx.runs_programs
    if programs:
        ctx.program_classes(cands)  # every public run before any choice is graded in full
    seen: set[str] = set()
    select_s = 0.0
    for k, cand in enumerate(cands, 1):
        for role, n in cand.tokens.items():
            tokens[role] = tokens.get(role, 0) + n
        chosen = weighted_vote(cands[:k], ctx)
        grade_s = 0.0
        if programs and chosen is not None:
            chosen = ctx.final(chosen)
            grade_s = chosen.graded.sandbox_s or 0.0
        program = cand.graded.extracted
        if programs and program is not None and program not in seen:
            seen.add(program)
            verdict = ctx.public_run(program)  # already run: its seconds, once per program
            select_s += verdict.seconds if verdict is not None else 0.0
        out.append(
            {
                "k": k,
                "correct": bool(chosen is not None and chosen.graded.correct),
                "answer": None if chosen is None else chosen.graded.extracted,
                "tokens_by_role": dict(tokens),
                "sandbox_s": round(select_s + grade_s, 4),
            }
        )
    return out


def vote_labels(ctx: Context, cands: list[Candidate]) -> list[Any]:
    """What each candidate voted for, for the record: its answer as written, or, for programs, its class id
    (equal ids: equal behaviour on the public tests; whole programs would bloat the record)."""
    if ctx.runs_programs:
        return ctx.program_classes(cands)
    return [c.key for c in cands]


class ReplyInt(NamedTuple):
    """A number read from a judge's or scorer's reply: ``value`` (None when the reply names none) and
    ``ambiguous`` (a guess: a long reply with several candidate numbers and no clear statement)."""

    value: int | None
    ambiguous: bool


# A number as a reply writes it: not part of a word or a longer number ("Qwen3", "8B", "1,000", "3%"),
# and not a denominator ("/10"); a decimal rating ("7.5") is one number.
_NUM = r"\d{1,9}(?:\.\d{1,9})?"
_REPLY_NUM = re.compile(rf"(?<![\w.,/]){_NUM}(?![\w%]|[.,]\d)")
# The scale the question set ("on a scale of 1 to 10", "out of 10", "1-3", "between 1 and 10"): its ends
# are not the answer, and a last-number rule would otherwise read the 10 of "8 on a scale of 1 to 10".
_SCALE = re.compile(
    rf"(?i)\bout\s+of\s+{_NUM}|\bbetween\s+{_NUM}\s+and\s+{_NUM}|(?<![\w.]){_NUM}\s*(?:-|–|\bto\b)\s*{_NUM}"
)
# An explicit statement of the pick or rating ("I choose Plan 3", "Plan 2 is better", "answer: 2",
# "rate this plan an 8"): the last one wins over numbers mentioned after it ("... than Plan 1").
_STATEMENT = re.compile(
    rf"(?i)(?:\b(?:answer|choice|pick|rating|score|verdict)\s*(?:is|:|=|would\s+be)\s*"
    rf"|\b(?:choose|pick|select|prefer|recommend|go\s+with)\s+"
    rf"|\brate\s+(?:it|this|that|them)(?:\s+plan|\s+solution|\s+one)?\s+(?:as\s+)?(?:an?\s+)?)"
    rf"(?:plan\s*#?\s*)?\**({_NUM})(?![\w%]|[.,]\d)"
    rf"|\bplan\s*#?\s*({_NUM})\**\s+(?:is|seems|looks|appears)\s+(?:to\s+be\s+)?(?:the\s+)?"
    rf"(?:best|better|most|strongest|stronger|optimal|preferable|superior|correct|right)"
)
# Where the reply itself starts: after a closed thinking block or E2C exploration (the model's own
# planning, full of list numbers and plan names); an unclosed one means the reply never came. The tags
# are the chain module's (a thinking model's and the release's), as every other reader of them uses.
_THINKING = ((THINK.explore_open, THINK.explore_close), (E2C.explore_open, E2C.explore_close))
_TAGS = re.compile("|".join(re.escape(t) for t in dict.fromkeys((*THINK.tags, *E2C.tags)) if t))
LONG_REPLY_WORDS = 20


def _as_int(num: str) -> int:
    """A number token as an integer; a decimal rounds half up (a "7.5" rating is 8, not 7 or 5)."""
    return int(float(num) + 0.5)


def reply_text(text: str) -> str | None:
    """The reply proper: the text after the last closing thinking/exploration tag, other tags removed;
    None when a thinking block or exploration is still open (the model never got to its reply)."""
    for opener, closer in _THINKING:
        if closer in text:
            text = text.rsplit(closer, 1)[1]
        elif opener in text:
            return None
    return _TAGS.sub(" ", text)


def read_reply_int(text: str, lo: int, hi: int) -> ReplyInt:
    """The number in ``[lo, hi]`` a judge's or scorer's reply gives as its answer.

    Thinking (``<think>...</think>``) and an E2C exploration are dropped first, as are the tags; the scale
    the prompt named ("1 to 10", "out of 10", "/10") is not a candidate. Then, in order: the last boxed
    number in range, the last explicit statement ("I choose Plan 3", "Plan 2 is better than Plan 1",
    "rate this plan an 8"), else the last number in range (a reasoned reply ends with its verdict; the
    first number is usually a restated scale or plan name). ``value`` is None when the reply holds no
    number in range (callers fall back and report it unparsed); ``ambiguous`` is True when the value is
    that last-number guess in a long reply (over ``LONG_REPLY_WORDS`` words) naming several different
    numbers in range.
    """
    body = reply_text(text) if isinstance(text, str) else None
    if body is None:
        return ReplyInt(None, False)

    def in_range(nums: list[str]) -> list[int]:
        return [v for v in map(_as_int, nums) if lo <= v <= hi]

    box = last_boxed(body)
    boxed = in_range(_REPLY_NUM.findall(box)) if box is not None else []
    if boxed:
        return ReplyInt(boxed[-1], False)
    body = _SCALE.sub(" ", body)
    stated = in_range([a or b for a, b in _STATEMENT.findall(body)])
    if stated:
        return ReplyInt(stated[-1], False)
    found = in_range(_REPLY_NUM.findall(body))
    if not found:
        return ReplyInt(None, False)
    return ReplyInt(found[-1], len(body.split()) > LONG_REPLY_WORDS and len(set(found)) > 1)


def judge_pick(ctx: Context, plans: list[str], tag: str = "judge") -> tuple[int, bool, bool]:
    """Ask the model which plan is best; returns (index, whether its reply named one, whether that was a
    guess from a long reply naming several plans; :func:`read_reply_int`). An unreadable reply falls back
    to the first plan."""
    if len(plans) == 1:
        return 0, True, False
    listing = "\n\n".join(f"Plan {i + 1}:\n{p.strip()}" for i, p in enumerate(plans))
    msg = (
        f"Problem:\n{ctx.question}\n\nCandidate plans for solving it:\n\n{listing}\n\n"
        f"Which plan is most likely to lead to a correct answer? Reply with the plan number only (1-{len(plans)})."
    )
    prompt = ctx.chat(msg)
    s = ctx.settings
    greedy = Sampling(max_tokens=s.judge_tokens, temperature=0.0, seed=ctx.seed(tag))
    out = ctx.gen.generate([prompt], greedy, role="judge")[0][0]
    pick = read_reply_int(out.text, 1, len(plans))
    return (pick.value - 1, True, pick.ambiguous) if pick.value is not None else (0, False, False)


def score_texts(ctx: Context, partials: list[str], what: str, tag: str) -> list[float]:
    """The model's 1-10 rating of each partial solution or plan (greedy, one batched call; 5 when a reply
    holds no rating; read by :func:`read_reply_int`)."""
    if not partials:
        return []
    msgs = [
        (
            f"Problem:\n{ctx.question}\n\nPartial {what}:\n{p.strip() or '(empty)'}\n\n"
            "How likely is this to lead to a correct final answer? Reply with one number from 1 to 10."
        )
        for p in partials
    ]
    s = ctx.settings
    greedy = Sampling(max_tokens=s.judge_tokens, temperature=0.0, seed=ctx.seed(tag))
    outs = ctx.gen.generate([ctx.chat(m) for m in msgs], greedy, role="score")
    return [float(v) if (v := read_reply_int(row[0].text, 1, 10).value) is not None else 5.0 for row in outs]


def normalize_plan(p: str) -> str:
    return " ".join(re.findall(r"\w+", p.lower()))


def dedupe_plans(plans: list[str], threshold: float = 0.9) -> list[str]:
    """Drop near-duplicate plans (word-set Jaccard similarity >= ``threshold`` with a kept one) and empty ones."""
    kept: list[tuple[str, set[str]]] = []
    for p in plans:
        words = set(normalize_plan(p).split())
        if not words:
            continue
        if any(len(words & w) / len(words | w) >= threshold for _, w in kept):
            continue
        kept.append((p, words))
    return [p for p, _ in kept]


def kmeans(x: Any, k: int, seed: int = 0, iters: int = 50) -> tuple[Any, Any]:
    """Plain k-means (k-means++ start) on the rows of ``x``; returns (labels, centroids)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = x.shape[0]
    k = max(1, min(k, n))
    centers = [x[rng.integers(n)]]
    for _ in range(1, k):
        d = np.min(((x[:, None, :] - np.array(centers)[None]) ** 2).sum(-1), axis=1)
        if d.sum() <= 0:
            break
        centers.append(x[rng.choice(n, p=d / d.sum())])
    c = np.array(centers)
    labels = np.zeros(n, dtype=int)
    for _ in range(iters):
        labels = ((x[:, None, :] - c[None]) ** 2).sum(-1).argmin(1)
        new = np.array([x[labels == j].mean(0) if (labels == j).any() else c[j] for j in range(len(c))])
        if np.allclose(new, c):
            break
        c = new
    return labels, c


# ------------------------------------------------------------------------------------------------ methods


@register("greedy_cot", chains=True, budget_free=True)
def greedy_cot(ctx: Context, budget: int) -> tuple[Candidate | None, dict[str, Any]]:
    """One whole chain decoded greedily (temperature 0). The budget does not apply: K/N = 1 always."""
    cand = sample_full(ctx, 1, 0.0, "greedy")[0]
    return cand, {"responses": 1}


@register("self_consistency", chains=True, nestable=True)
def self_consistency(ctx: Context, budget: int) -> tuple[Candidate | None, dict[str, Any]]:
    """Self-consistency: N whole chains sampled at ``temperature``; the majority answer wins."""
    cands = sample_full(ctx, budget, ctx.settings.temperature, "sc")
    votes = vote_labels(ctx, cands)
    return weighted_vote(cands, ctx), {"votes": votes, "prefix": prefix_votes(cands, ctx)}


@register("e2c_sc", nestable=True)
def e2c_sc(ctx: Context, budget: int) -> tuple[Candidate | None, dict[str, Any]]:
    """E2C self-consistency: K sampled explorations, each executed (greedy); the majority answer wins."""
    plans, plan_tokens = explore_counted(ctx, budget)
    cands = execute(ctx, plans, plan_tokens=plan_tokens)
    votes = vote_labels(ctx, cands)
    return weighted_vote(cands, ctx), {"votes": votes, "prefix": prefix_votes(cands, ctx)}


@register("e2c_rp")
def e2c_rp(ctx: Context, budget: int) -> tuple[Candidate | None, dict[str, Any]]:
    """E2C random pick: K sampled explorations, one chosen uniformly at random (seeded) and executed."""
    plans = explore(ctx, budget)
    i = random.Random(ctx.seed("rp")).randrange(len(plans))
    return execute(ctx, [plans[i]])[0], {"picked": i}


@register("e2c_select_lm_judge")
def e2c_select_lm_judge(ctx: Context, budget: int) -> tuple[Candidate | None, dict[str, Any]]:
    """E2C with an LM judge: K sampled explorations; the model reads them all and names the most
    promising (its reply is mapped back to a plan by :func:`read_reply_int`; unreadable -> plan 1, with
    ``judge_parsed`` False; a guess from a long reply -> ``judge_ambiguous``); only that plan is executed."""
    plans = explore(ctx, budget)
    i, ok, ambiguous = judge_pick(ctx, plans)
    return execute(ctx, [plans[i]])[0], {"picked": i, "judge_parsed": ok, "judge_ambiguous": ambiguous}


@register("e2c_select_semantic_cluster", needs_embedder=True)
def e2c_select_semantic_cluster(ctx: Context, budget: int) -> tuple[Candidate | None, dict[str, Any]]:
    """E2C with semantic clustering: K sampled explorations are embedded (sentence-transformers),
    L2-normalised and clustered with k-means (``clusters``, 3 by default); the plan nearest each centroid is
    executed and its answer gets as many votes as its cluster has members."""
    import numpy as np

    if ctx.embed is None:
        raise ValueError("e2c_select_semantic_cluster needs an embedding model (TTSSettings.embedder)")
    plans = explore(ctx, budget)
    x = np.asarray(ctx.embed(plans), dtype=float)
    x = x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)
    labels, centers = kmeans(x, ctx.settings.clusters, seed=ctx.seed("kmeans") or 0)
    reps, sizes = [], []
    for j in range(len(centers)):
        members = np.flatnonzero(labels == j)
        if len(members) == 0:
            continue
        reps.append(int(members[((x[members] - centers[j]) ** 2).sum(1).argmin()]))
        sizes.append(len(members))
    cands = execute(ctx, [plans[i] for i in reps])
    for c, size in zip(cands, sizes, strict=True):
        c.weight = float(size)
    return weighted_vote(cands, ctx), {"representatives": reps, "cluster_sizes": sizes}


def accepted(c: Candidate) -> bool:
    """A well-formed answer: the chain parses with both phases and an answer was extracted."""
    return c.graded.extracted is not None and c.graded.chain_status == "ok"


# Bound on each quoted piece of public-test feedback (an input, an expected or a produced output).
FEEDBACK_CHARS = 300


def clip(text: str, limit: int = FEEDBACK_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was.

    >>> clip("abcdef", 3), clip("abc", 3)
    ('abc... (6 characters)', 'abc')
    """
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def error_line(stderr: str) -> str:
    """The error a crashed program reports: the last non-empty line of its standard error (a traceback
    ends with ``ZeroDivisionError: division by zero``), clipped; empty when it wrote none.

    >>> error_line("Traceback ...\\n  x = 1/0\\nZeroDivisionError: division by zero\\n")
    'ZeroDivisionError: division by zero'
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return clip(lines[-1], 200) if lines else ""


def describe_failure(
    tests: Any, i: int, n_failed: int, outcome: str, error: str = "", got: str | None = None
) -> str:
    """A short description of public test ``i`` of ``tests`` (:class:`e2c.rewards.code_tests.CodeTests`,
    the public ones only) failing with ``outcome``: the test's input, its expected output, and what the
    program did (``got``: its output, when known; ``error``: the error it raised). Each quoted piece is
    clipped (:data:`FEEDBACK_CHARS`). Pure: the caller passes only public tests, so no hidden test can appear.
    """
    t = tests.tests[i]
    lines = [f"{n_failed} of {len(tests.tests)} public tests failed. The first, public test {i + 1}:"]
    if tests.mode == "stdin":
        lines += [f"input:\n{clip(t.input)}", f"expected output:\n{clip(str(t.output))}"]
    elif tests.mode == "call":
        args = ", ".join(json.dumps(a, ensure_ascii=False) for a in t.args)
        lines += [
            f"call: {clip(f'{tests.fn_name}({args})')}",
            f"expected return value: {clip(json.dumps(t.output))}",
        ]
    else:
        lines.append(f"test code:\n{clip(t.code)}")
    if outcome == "timeout":
        lines.append(f"result: it ran past the time limit ({tests.time_limit:g} s)")
    elif outcome == "memory":
        lines.append("result: it ran out of memory")
    elif outcome == "output_limit":
        lines.append("result: it wrote too much output")
    elif error:
        lines.append(f"result: it raised {error}")
    elif got is not None:
        lines.append(f"got:\n{clip(got)}")
    elif outcome == "wrong":
        lines.append("result: a different value" if tests.mode == "call" else "result: a different output")
    else:
        lines.append("result: it crashed")
    return "\n".join(lines)


def _stdin_output(ctx: Context, program: str, i: int) -> tuple[str | None, str]:
    """(standard output or None, error line) of ``program`` rerun on public test ``i`` of a stdin problem:
    the judge's verdicts hold no outputs, so the program runs once more through
    :func:`e2c.rewards.code_judge.run_on_test`. Its sandbox seconds count as ``feedback``."""
    tests = ctx.public_tests
    assert tests is not None
    r = code_judge.run_on_test(program, tests, i, ctx.programs())
    ctx.sandbox_by_role["feedback"] += r.seconds
    if r.status == "ok":
        return r.stdout, ""
    if r.status == "exit":
        return None, error_line(r.stderr) or "an error"
    return None, ""


def public_failure(ctx: Context, cand: Candidate) -> str:
    """Why the candidate's program fails the problem's public tests (:func:`describe_failure` of the first
    failing one), or ``""`` when it passes them all or cannot be judged there: not a program problem, no
    program, no public tests, or a sandbox failure (not the program's fault). Only public tests are run
    (:meth:`~e2c.tts.base.Context.public_run`), so the text never holds a hidden test's data."""
    program = cand.graded.extracted
    verdict = ctx.public_run(program)
    tests = ctx.public_tests
    if verdict is None or tests is None or program is None or verdict.status == "error":
        return ""
    if verdict.status != "ok":
        return f"The program was not run: {verdict.status.replace('_', ' ')}."
    failed = [i for i, o in enumerate(verdict.outcomes) if o != "pass"]
    if not failed:
        return ""
    i, outcome = failed[0], verdict.outcomes[failed[0]]
    load_error = verdict.extra.get("load_error", "")
    if load_error:
        return f"The program fails before any test runs: {clip(str(load_error), 200)}."
    got, error = None, ""
    if tests.mode == "stdin" and outcome in ("wrong", "runtime_error"):
        got, error = _stdin_output(ctx, program, i)
    elif outcome == "runtime_error":
        raised = verdict.behaviour[i].lstrip("!") if i < len(verdict.behaviour) else ""
        error = "an AssertionError (the assertion failed)" if raised == "AssertionError" else raised
    return describe_failure(tests, i, len(failed), outcome, error, got)


def refine(ctx: Context, plan: str, cand: Candidate, round_: int, failure: str = "") -> str:
    """A revised plan from the old plan and the tail of its execution (the feedback); for a program that
    fails a public test, also ``failure`` (:func:`public_failure`: public tests only)."""
    tail = cand.response[-1500:]
    if failure:
        outcome = f"Its program was run on the public tests the problem shows:\n{failure}\n\n"
    else:
        outcome = "It did not reach a clear final answer. "
    msg = (
        f"Problem:\n{ctx.question}\n\nA plan for solving it:\n{plan.strip()}\n\n"
        f"Carrying the plan out ended like this:\n...{tail}\n\n{outcome}"
        "Write a revised, better plan. Reply with the plan only."
    )
    s = ctx.settings
    sampling = Sampling(1, s.refine_tokens, s.temperature, s.top_p, seed=ctx.seed("refine", round_))
    out = ctx.gen.generate([ctx.chat(msg)], sampling, role="refine")
    return out[0][0].text.strip()


@register("e2c_react_loop")
def e2c_react_loop(ctx: Context, budget: int) -> tuple[Candidate | None, dict[str, Any]]:
    """E2C-ReAct: K sampled explorations, near-duplicates removed; the LM judge picks a plan, which is
    executed. A well-formed answer is accepted (a program: one that also passes the problem's public
    tests). Otherwise the plan is refined from the tail of its execution, and for a program from its first
    failing public test (input, expected and produced output or the error; :func:`public_failure`), up to
    ``react_rounds`` rounds per plan; when a refinement stops changing the plan, or the rounds run out, the
    loop falls back to the judge's pick among the unused plans. At most K executions; with none accepted,
    the last execution's answer stands."""
    pool = dedupe_plans(explore(ctx, budget)) or [""]
    i, _, _ = judge_pick(ctx, pool)
    plan, unused = pool[i], [p for j, p in enumerate(pool) if j != i]
    trace: list[dict[str, Any]] = []
    last: Candidate | None = None
    rounds = executions = 0
    while executions < budget:
        last = execute(ctx, [plan], tag=f"execute{executions}")[0]
        executions += 1
        failure = public_failure(ctx, last)
        ok = accepted(last) and not failure
        step = {"plan": plan[:200], "answer": last.graded.extracted, "accepted": ok}
        if ctx.runs_programs:  # the program itself is in the chosen response; the trace keeps a glimpse
            step["answer"] = None if last.graded.extracted is None else clip(last.graded.extracted, 200)
            step["public_failure"] = failure.split("\n", 1)[0]
        trace.append(step)
        if ok:
            break
        new = refine(ctx, plan, last, executions, failure) if rounds < ctx.settings.react_rounds else ""
        if new and normalize_plan(new) != normalize_plan(plan):
            plan, rounds = new, rounds + 1
            continue
        if not unused:
            break  # stalled with no plan left
        j, _, _ = judge_pick(ctx, unused, tag=f"judge{executions}")
        plan, rounds = unused.pop(j), 0
    return last, {"plans": len(pool), "executions": executions, "trace": trace}


def best_leaves(leaves: list[tuple[str, float, bool]], n: int) -> list[tuple[str, float, bool]]:
    """The ``n`` best of ``(text, score, complete)`` leaves, in generation order.

    Complete leaves rank before open ones (open nodes only fill in for missing complete leaves), then the
    higher score; ties keep generation order. A level can complete more leaves than are wanted, all of them
    already generated and scored: cutting by generation order would throw away better-scored ones.
    """
    ranked = sorted(range(len(leaves)), key=lambda i: (not leaves[i][2], -leaves[i][1]))  # stable
    return [leaves[i] for i in sorted(ranked[: max(n, 0)])]


def _tree_search(
    ctx: Context, leaves_wanted: int, prompt: str, stop: list[str], max_steps: int, what: str, tag: str
) -> list[tuple[str, float, bool]]:
    """Beam search over text prefixes: expand the root into ``leaves_wanted`` and each later frontier node
    into ``tree_branching`` sampled steps of ``tree_step_tokens``; a step that stops (``stop`` or EOS) completes a leaf; open nodes are scored by
    the model (1-10) and the best ``tree_beam`` kept. Ends with ``leaves_wanted`` complete leaves or after
    ``max_steps`` levels (open nodes then count as leaves); of more leaves than wanted, the best-scored
    are kept (:func:`best_leaves`). Returns (text, score, complete) per leaf."""
    s = ctx.settings
    frontier: list[tuple[str, float]] = [(s.opener, 0.0)]
    leaves: list[tuple[str, float, bool]] = []
    for depth in range(max_steps):
        if not frontier or len(leaves) >= leaves_wanted:
            break
        # The root is expanded into `leaves_wanted` children (K/N sets the tree's width, as it sets the
        # sample count of the other methods); deeper nodes into `tree_branching` each.
        width = max(leaves_wanted, 1) if depth == 0 else s.tree_branching
        step = Sampling(width, s.tree_step_tokens, s.temperature, s.top_p, stop, ctx.seed(tag, depth))
        outs = ctx.gen.generate([prompt + t for t, _ in frontier], step, role="tree")
        grown = [(text + c.text, c) for (text, _), row in zip(frontier, outs, strict=True) for c in row]
        scores = score_texts(ctx, [t for t, _ in grown], what, f"{tag}-{depth}")
        children: list[tuple[str, float]] = []
        for (text, c), sc in zip(grown, scores, strict=True):
            if c.finish_reason == "stop":
                leaves.append((text + (c.stop_reason or ""), sc, True))
            else:
                children.append((text, sc))
        children.sort(key=lambda t: -t[1])  # stable: ties keep generation order
        frontier = children[: s.tree_beam]
    if len(leaves) < leaves_wanted:
        leaves += [(t, sc, False) for t, sc in frontier]
    return best_leaves(leaves, max(leaves_wanted, 1))


@register("e2c_tot", tree_explores=True)
def e2c_tot(ctx: Context, budget: int) -> tuple[Candidate | None, dict[str, Any]]:
    """E2C tree of thoughts: a beam search over exploration prefixes (steps of ``tree_step_tokens``, scored
    by the model, best ``tree_beam`` kept) until K explorations are complete; the best-scored complete
    exploration (else the best open one) is executed."""
    s = ctx.settings
    steps = max(1, -(-s.explore_budget // s.tree_step_tokens))
    leaves = _tree_search(
        ctx, budget, ctx.chain_prompt(), ctx.fmt.stop_strings("explore"), steps, "plan", "etot"
    )
    if not leaves:
        return None, {"leaves": 0}
    best = max(leaves, key=lambda t: (t[2], t[1]))
    plan = best[0]
    if plan.endswith(ctx.fmt.explore_boundary):
        plan = plan[: -len(ctx.fmt.explore_boundary)]
    return execute(ctx, [plan])[0], {"leaves": len(leaves), "best_score": best[1]}


def _tot_answer(ctx: Context, budget: int, tag: str) -> tuple[Candidate | None, dict[str, Any]]:
    s = ctx.settings
    steps = max(1, -(-s.cot_tokens // s.tree_step_tokens))
    leaves = _tree_search(
        ctx, budget, ctx.chain_prompt(), ctx.fmt.stop_strings("full"), steps, "solution", tag
    )
    cands = [ctx.grade(text, weight=score) for text, score, _ in leaves]
    if not cands:
        return None, {"leaves": 0}
    # The highest-scored leaf with an answer; the model's scores decide, not a vote.
    answered = [c for c in cands if c.key is not None] or cands
    best = max(answered, key=lambda c: c.weight)
    return best, {"leaves": len(leaves), "scores": [c.weight for c in cands]}


@register("tree_of_thoughts", chains=True)
def tree_of_thoughts(ctx: Context, budget: int) -> tuple[Candidate | None, dict[str, Any]]:
    """Tree of Thoughts (Yao et al.) over whole chains: thoughts are steps of ``tree_step_tokens``; every
    node is valued by the model (1-10) and only the best ``tree_beam`` per level are expanded (BFS with
    pruning), until N complete solutions exist; the best-valued one answers. (The paper's code keeps the
    first N nodes with no scoring; this is the published algorithm.)"""
    return _tot_answer(ctx, budget, "tot")


@register("forest_of_thought", chains=True)
def forest_of_thought(ctx: Context, budget: int) -> tuple[Candidate | None, dict[str, Any]]:
    """Forest of Thought: ``forest_trees`` independent trees (each a tree_of_thoughts with N / trees
    leaves, differently seeded); the trees' answers are combined by majority vote. (The paper's code never
    uses its trees' answers, which makes it self-consistency plus waste; here the trees decide.)"""
    trees = max(1, min(ctx.settings.forest_trees, budget))
    per = max(1, budget // trees)
    answers = []
    for t in range(trees):
        cand, _ = _tot_answer(ctx, per, f"forest{t}")
        if cand is not None:
            answers.append(Candidate(cand.response, cand.plan, cand.graded, 1.0))
    chosen = weighted_vote(answers, ctx) or (answers[0] if answers else None)
    return chosen, {"trees": trees, "votes": vote_labels(ctx, answers)}
