"""Turn a traced run of a task's reference program into an exploration (plan) and a narrated execution.

The execution says, step by step, what each executed line did to the variables: a line's own sentence
when it has one (or its label followed by the computation), otherwise a generic sentence (``x = a * b = 6 * 7 = 42``; ``Check b != 0: true``).
Every number in it comes from the trace, never from the task generator, so a narration that boxes the
right answer is evidence that the program really computed it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from e2c.data.synthetic.task import Line, Task
from e2c.data.synthetic.tracer import TraceResult

PLAN_OPENER = "I need to make a step-by-step plan."
MAX_EVENTS_PER_STEP = 60


def fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(fmt_value(x) for x in v) + "]"
    return str(v)


def plan_text(task: Task) -> str:
    """The exploration: candidate approaches, the choice and why, then the numbered steps."""
    lines = [PLAN_OPENER, "Candidate approaches:"]
    lines += [f"- {a}" for a in task.approaches]
    lines.append(f"I will {task.approaches[task.chosen]}, because {task.reason}.")
    lines += [f"{i}. {st.title}: {st.detail}." for i, st in enumerate(task.steps, 1)]
    return "\n".join(lines)


def _substitute(expr: str, pre: Mapping[str, Any]) -> str:
    def rep(m: re.Match[str]) -> str:
        v = pre.get(m.group(0))
        if isinstance(v, bool) or not isinstance(v, int):
            return m.group(0)
        return f"({v})" if v < 0 else str(v)

    return re.sub(r"\b[A-Za-z_]\w*\b", rep, expr)


def _generic(
    code: str,
    changes: Mapping[str, Any],
    pre: Mapping[str, Any],
    post: Mapping[str, Any],
    next_line: int | None,
    lineno: int,
) -> str | None:
    body = code.strip()
    if body.startswith(("if ", "while ")):
        cond = body.split(" ", 1)[1].rstrip(":")
        holds = next_line == lineno + 1
        tail = (
            "" if body.startswith("if ") else (", so the loop continues" if holds else ", so the loop stops")
        )
        return f"Check {cond} with {_substitute(cond, pre)}: {'true' if holds else 'false'}{tail}."
    if body.startswith("for "):
        if not changes:
            return None
        return "Next: " + ", ".join(f"{k} = {fmt_value(v)}" for k, v in changes.items()) + "."
    if not changes:
        return None
    m = re.fullmatch(r"([A-Za-z_][\w, ]*?)\s*=\s*(.+)", body)
    names = [n.strip() for n in m.group(1).split(",")] if m else []
    if names and all(n in post for n in names):
        rhs = m.group(2)  # type: ignore[union-attr]
        sub = _substitute(rhs, pre)
        value = ", ".join(fmt_value(post[n]) for n in names)
        if rhs.strip() == value:
            return f"Set {', '.join(names)} = {value}."
        mid = f" = {sub}" if sub not in (rhs, value) else ""
        return f"{', '.join(names)} = {rhs}{mid} = {value}."
    return "Now " + ", ".join(f"{k} = {fmt_value(v)}" for k, v in changes.items()) + "."


def execution_steps(
    task: Task, trace: TraceResult, upto: int | None = None
) -> tuple[list[str], dict[str, Any]]:
    """Narrated paragraphs (one per step, ``Step k: title.`` first) and the final variable state.

    ``upto`` stops after that step (1-based), for variable-tracing questions.
    """
    _, where = task.source()
    state: dict[str, Any] = {}
    per_step: dict[int, list[str]] = {}
    events = trace.events
    for i, (lineno, changes) in enumerate(events):
        if lineno not in where:
            continue
        si, line = where[lineno]
        if upto is not None and si >= upto:
            break
        pre = dict(state)
        state.update(changes)
        nxt = events[i + 1][0] if i + 1 < len(events) else None
        text = _say(line, changes, pre, state, nxt, lineno)
        if text:
            per_step.setdefault(si, []).append(text)
    paras = []
    last = len(task.steps) if upto is None else upto
    for si in range(last):
        said = per_step.get(si, [])
        if len(said) > MAX_EVENTS_PER_STEP:
            keep = MAX_EVENTS_PER_STEP // 2
            said = [
                *said[:keep],
                f"(... {len(said) - 2 * keep} more updates of the same kind ...)",
                *said[-keep:],
            ]
        paras.append(f"Step {si + 1}: {task.steps[si].title}.\n" + "\n".join(said))
    return paras, state


def _say(
    line: Line,
    changes: Mapping[str, Any],
    pre: Mapping[str, Any],
    post: Mapping[str, Any],
    nxt: int | None,
    lineno: int,
) -> str | None:
    generic = _generic(line.code, changes, pre, post, nxt, lineno)
    if not (line.say and changes):
        return generic
    try:
        said = line.say.format(**{k: v if isinstance(v, list) else fmt_value(v) for k, v in post.items()})
    except (KeyError, IndexError, AttributeError):
        return generic
    # A template ending in ":" is a label for the computation; otherwise it is the whole sentence.
    return f"{said} {generic}" if said.endswith(":") and generic else said


def execution_text(task: Task, trace: TraceResult) -> str:
    """The full narrated execution, ending with the result from the trace and the boxed answer."""
    paras, state = execution_steps(task, trace)
    value = state.get(task.result, trace.value)
    if task.kind == "countdown":
        tail = f"The operations reach {fmt_value(value)}, so the expression is \\boxed{{{task.answer}}}."
    else:
        tail = f"The result is {task.result} = {fmt_value(value)}, so the answer is \\boxed{{{fmt_value(value)}}}."
    return "\n\n".join([*paras, tail])
