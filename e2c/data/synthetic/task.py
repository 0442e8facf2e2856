"""The shape of a synthetic task: a problem, its answer, a plan, and a reference program.

A program is a list of steps; each step is a titled list of lines of the body of ``solve()``, and a line
may carry a narration template (``str.format`` over the variables after the line ran). Lines without one
are narrated generically (see :mod:`e2c.data.synthetic.narrate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Line:
    code: str  # body line, indented relative to the function body (4 spaces per level)
    say: str | None = None


@dataclass
class Step:
    title: str
    detail: str
    lines: list[Line]


@dataclass
class Task:
    family: str
    level: int
    problem: str
    answer: str  # what the execution boxes (a number, or the countdown expression)
    expected: int  # the program's return value, computed independently
    steps: list[Step]
    result: str  # the returned variable
    approaches: list[str]
    chosen: int
    reason: str
    kind: str = "math"
    gold: str = ""  # the reference for grading (the answer, or countdown's JSON)
    numbers: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.gold:
            self.gold = self.answer

    def source(self) -> tuple[str, dict[int, tuple[int, Line]]]:
        """The program text and a map ``lineno -> (step index, line)``."""
        out = ["def solve():"]
        where: dict[int, tuple[int, Line]] = {}
        for si, st in enumerate(self.steps):
            out.append(f"    # step {si + 1}: {st.title}")
            for ln in st.lines:
                out.append("    " + ln.code)
                where[len(out)] = (si, ln)
        out.append(f"    return {self.result}")
        return "\n".join(out) + "\n", where
