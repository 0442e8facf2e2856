"""Generate verified synthetic E2C samples and split them into SFT / RL / eval sets.

Per task: a family makes the problem, the independent answer and a reference program; the program runs
under the tracer in a limited subprocess; the trace is narrated into the execution. A sample is kept only if
the run succeeded, its value equals the answer, and the narrated execution grades correct (for the code
family, its function passes the task's tests in the sandbox); the rest are dropped and counted by reason.
Task ``i`` draws from ``random.Random(f"{seed}:{i}")``, so the output depends only on the seed, the count and
the chosen families and levels, never on batching or timing. Splits hash the problem text.
More: docs/data.md, "Synthetic tasks".
"""

from __future__ import annotations

import hashlib
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from e2c.chain import E2C, ChainFormat
from e2c.data.paper import unit_hash
from e2c.data.synthetic.code_families import CodeTask, code_execution, code_plan
from e2c.data.synthetic.families import FAMILIES, LEVELS, Task, family_names, get_family
from e2c.data.synthetic.narrate import PLAN_OPENER, execution_steps, execution_text, fmt_value, plan_text
from e2c.data.synthetic.tracer import TraceResult, run_traced
from e2c.rewards.code_tests import extract_code
from e2c.rewards.extract import extract_answer
from e2c.rewards.grader import GradeResult, grade
from e2c.rewards.kinds import prompt_format

SPLITS = ("sft", "rl", "eval")
DEFAULT_FRACTIONS = (0.8, 0.15, 0.05)
BATCH = 250


@dataclass
class Sample:
    """One verified sample."""

    uid: str
    split: str
    family: str
    level: int
    variant: str  # "solve" or "trace"
    problem: str
    exploration: str
    execution: str
    answer: str  # boxed text
    gold: str  # grading reference
    kind: str


@dataclass
class Report:
    """What a generation run made and dropped, and how fast."""

    made: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.made.values())

    def line(self) -> str:
        rate = self.total / self.seconds if self.seconds else 0.0
        drops = ", ".join(f"{k} {v}" for k, v in sorted(self.dropped.items())) or "none"
        return f"synthetic: {self.total} samples in {self.seconds:.1f} s ({rate:.0f}/s); dropped: {drops}"


def split_of(problem: str, seed: int, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> str:
    """The split of a problem: a hash of its text (and the seed) against the cumulative fractions."""
    h = unit_hash(f"{seed}\x00{problem}")
    acc = 0.0
    for name, frac in zip(SPLITS, fractions):
        acc += frac
        if h < acc:
            return name
    return SPLITS[-1]


def make_task(
    seed: int, i: int, families: Sequence[str] | None = None, levels: Sequence[int] = LEVELS
) -> Task:
    """Task number ``i`` of a seed, cycling through ``families`` (default: every default family, in registry
    order; opt-in ones such as ``code`` only when named) and, for each round of them, the next of ``levels``."""
    names = list(families or FAMILIES)
    family = names[i % len(names)]
    level = levels[(i // len(names)) % len(levels)]
    return get_family(family)(random.Random(f"{seed}:{i}"), level)


def plan_of(task: Task) -> str:
    """The exploration of a task (a code task's plan ends with writing the function)."""
    return code_plan(task) if isinstance(task, CodeTask) else plan_text(task)


def execution_of(task: Task, trace: TraceResult) -> str:
    """The narrated execution of a task's traced run (a code task's ends with the function in a
    ``python`` block)."""
    return code_execution(task, trace) if isinstance(task, CodeTask) else execution_text(task, trace)


def _verify(task: Task, trace: TraceResult, execution: str, graded: GradeResult | None = None) -> str | None:
    """Why a sample must be dropped, or None (``graded``: the grader's verdict when already known)."""
    if not trace.ok:
        return "program_error"
    if trace.value != task.expected:
        return "program_disagrees"
    if task.kind == "code":
        program, _ = extract_code(execution)
        if program != task.answer:
            return "narration_disagrees"
    else:
        boxed, _ = extract_answer(execution)
        if boxed is None or boxed.strip() != task.answer:
            return "narration_disagrees"
    res = graded if graded is not None else grade(execution, task.gold, task.kind, fmt=None)
    if not res.correct:
        return "grader_disagrees"
    return None


def _code_grades(
    tasks: Sequence[Task], traces: Sequence[TraceResult], workers: int
) -> dict[int, GradeResult]:
    """The grader's verdicts on a round's code tasks whose program agreed, by index, graded concurrently: each
    runs the written function on its tests in the sandbox (tens of ms, a subprocess), the rest of a round is
    cheap. The verdicts do not depend on the order they are made in."""
    jobs = {
        i: execution_of(t, tr)
        for i, (t, tr) in enumerate(zip(tasks, traces))
        if t.kind == "code" and tr.ok and tr.value == t.expected
    }
    if not jobs:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        verdicts = ex.map(lambda i: grade(jobs[i], tasks[i].gold, "code", fmt=None), jobs)
        return dict(zip(jobs, verdicts))


def _trace_variant(task: Task, trace: TraceResult, rng: random.Random) -> tuple[str, str, str, str] | None:
    """A "what is x after step k" question: (problem, exploration, execution, answer), or None."""
    if len(task.steps) < 2:
        return None
    k = rng.randint(1, len(task.steps) - 1)
    paras, state = execution_steps(task, trace, upto=k)
    _, before = execution_steps(task, trace, upto=k - 1)
    names = [n for n, v in state.items() if isinstance(v, int) and not isinstance(v, bool)]
    # Prefer a variable that step k itself changed: the question then needs the trace, not the source.
    changed = [n for n in names if before.get(n) != state[n]]
    if not names:
        return None
    var = rng.choice(sorted(changed or names))
    value = fmt_value(state[var])
    source, _ = task.source()
    title = task.steps[k - 1].title
    problem = (
        f"Here is a program:\n```python\n{source}```\n"
        f"What is the value of `{var}` right after step {k} ({title}) finishes?"
    )
    plan = "\n".join(
        [PLAN_OPENER, f"I will run the program by hand up to the end of step {k}, tracking every variable."]
        + [
            f"{j}. {st.title}: run its lines and record the changes."
            for j, st in enumerate(task.steps[:k], 1)
        ]
        + [f"{k + 1}. Read the variable: report {var}."]
    )
    execution = "\n\n".join(
        [
            *paras,
            f"Step {k + 1}: Read the variable.\nAfter step {k}, {var} = {value}, so the answer is \\boxed{{{value}}}.",
        ]
    )
    return problem, plan, execution, value


def _traced_batches(tasks: list[Task], workers: int) -> Iterator[list[TraceResult]]:
    batches = [tasks[i : i + BATCH] for i in range(0, len(tasks), BATCH)]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        yield from ex.map(lambda b: run_traced([t.source()[0] for t in b]), batches)


def generate(
    n: int,
    seed: int = 0,
    trace_frac: float = 0.25,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    workers: int = 2,
    progress: Callable[[int, int], None] | None = None,
    families: Sequence[str] | None = None,
    levels: Sequence[int] = LEVELS,
) -> tuple[list[Sample], Report]:
    """Make ``n`` verified problem samples (plus variable-tracing variants for a ``trace_frac`` share of
    the SFT problems) of ``families`` (default: all) at ``levels``. Returns the samples in a deterministic
    order and a report."""
    if n < 1:
        raise ValueError("n must be at least 1")
    unknown = [f for f in families or () if f not in family_names()]
    if unknown or not levels or any(lv not in LEVELS for lv in levels):
        what = f"family {unknown[0]!r}" if unknown else f"levels {list(levels)}"
        raise ValueError(f"unknown {what}; families: {', '.join(family_names())}; levels: {list(LEVELS)}")
    report = Report()
    t0 = time.perf_counter()
    seen: set[str] = set()
    out: list[Sample] = []
    next_i = 0
    kept = 0
    while kept < n:
        want = n - kept
        tasks: list[Task] = []
        while len(tasks) < int(want * 1.1) + 8:
            task = make_task(seed, next_i, families, levels)
            next_i += 1
            if task.problem in seen:
                report.dropped["duplicate"] += 1
                continue
            seen.add(task.problem)
            tasks.append(task)
        traces = [tr for batch in _traced_batches(tasks, workers) for tr in batch]
        graded = _code_grades(tasks, traces, workers)
        before = kept
        for index, (task, trace) in enumerate(zip(tasks, traces)):
            if kept >= n:
                break
            execution = execution_of(task, trace) if trace.ok else ""
            why = _verify(task, trace, execution, graded.get(index))
            if why:
                report.dropped[why] += 1
                continue
            split = split_of(task.problem, seed, fractions)
            uid = hashlib.sha1(task.problem.encode()).hexdigest()[:12]
            out.append(
                Sample(
                    uid,
                    split,
                    task.family,
                    task.level,
                    "solve",
                    task.problem,
                    plan_of(task),
                    execution,
                    task.answer,
                    task.gold,
                    task.kind,
                )
            )
            report.made[split] += 1
            kept += 1
            rng = random.Random(f"{seed}:trace:{uid}")
            if split == "sft" and rng.random() < trace_frac:
                var = _trace_variant(task, trace, rng)
                if var is not None:
                    problem, plan, exe, value = var
                    if extract_answer(exe)[0] == value:
                        out.append(
                            Sample(
                                uid + "-t",
                                "sft",
                                task.family,
                                task.level,
                                "trace",
                                problem,
                                plan,
                                exe,
                                value,
                                value,
                                "math",
                            )
                        )
                        report.made["sft_trace"] += 1
                    else:
                        report.dropped["trace_narration"] += 1
        if kept == before:  # a whole round verified nothing: more rounds would not either
            raise RuntimeError(
                f"synthetic: no sample of {len(tasks)} verified; dropped {dict(report.dropped)}"
            )
        if progress:
            progress(kept, n)
    report.seconds = time.perf_counter() - t0
    return out, report


# --------------------------------------------------------------------------------------------- rows
def sft_row(s: Sample, fmt: ChainFormat = E2C) -> dict[str, Any]:
    """verl multi-turn SFT row: the user prompt and the tagged chain as the assistant turn."""
    response = fmt.format_response(f"\n{s.exploration}\n", f"\n{s.execution}\n")
    return {
        "messages": [
            *prompt_format(fmt, s.kind).messages(s.problem),
            {"role": "assistant", "content": response},
        ],
        "data_source": f"synthetic/{s.family}",
        "extra_info": {
            "id": s.uid,
            "family": s.family,
            "difficulty": s.level,
            "variant": s.variant,
            "answer": s.gold,
            "kind": s.kind,
        },
    }


def rl_row(s: Sample, index: int, fmt: ChainFormat = E2C) -> dict[str, Any]:
    """verl RL row: chat prompt, rule reward with the reference, difficulty in extra_info."""
    return {
        "prompt": prompt_format(fmt, s.kind).messages(s.problem),
        "data_source": f"synthetic/{s.family}",
        "ability": "code" if s.kind == "code" else "math",
        "reward_model": {"style": "rule", "ground_truth": s.gold},
        "extra_info": {
            "index": index,
            "id": s.uid,
            "kind": s.kind,
            "family": s.family,
            "difficulty": s.level,
            "split": "rl",
        },
    }


def eval_row(s: Sample) -> dict[str, Any]:
    """Benchmark-registry record (data source ``synthetic``)."""
    return {
        "id": f"synthetic-{s.uid}",
        "problem": s.problem,
        "answer": s.gold,
        "kind": s.kind,
        "choices": [],
        "data_source": "synthetic",
    }


def rows_by_split(samples: Sequence[Sample], fmt: ChainFormat = E2C) -> dict[str, list[dict[str, Any]]]:
    """``{"sft": [...], "rl": [...], "eval": [...]}`` in the processed schemas."""
    sft = [sft_row(s, fmt) for s in samples if s.split == "sft"]
    rl = [rl_row(s, i, fmt) for i, s in enumerate(x for x in samples if x.split == "rl")]
    ev = [eval_row(s) for s in samples if s.split == "eval"]
    return {"sft": sft, "rl": rl, "eval": ev}
