"""The synthetic code family: write a small Python function, with its public examples shown and hidden tests.

The function's body is the reference program, traced on the first public example; the answer is the function
in a fenced ``python`` block; its two public and six hidden ``call`` tests' outputs come from an independent
implementation (``reference``), never from the step lines. More: docs/data.md, "Synthetic tasks".

>>> t = code(random.Random("0:0"), 2)
>>> tests = json.loads(t.gold)
>>> t.kind, t.level, tests["mode"], tests["fn_name"] == t.fn_name, sum(x.get("public", False) for x in tests["tests"])
('code', 2, 'call', True, 2)
>>> t.answer == t.program and t.program.startswith(f"def {t.fn_name}(")
True
"""

from __future__ import annotations

import copy
import functools
import heapq
import itertools
import json
import operator
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from e2c.data.synthetic.narrate import PLAN_OPENER, execution_steps
from e2c.data.synthetic.task import Line, Step, Task
from e2c.data.synthetic.tracer import TraceResult
from e2c.rewards.code_tests import CodeTest, CodeTests

FAMILY = "code"
PUBLIC_TESTS = 2
HIDDEN_TESTS = 6
TIME_LIMIT = 2.0
"""Seconds per test: the functions take microseconds, so a looping answer should cost little."""
PUBLIC_SIZES = (3, 4)  # items in a public example: the first one is narrated, so it stays short
HIDDEN_SIZES = (5, 8)  # items in a random hidden test
SHORT = 4
"""A list of at most this many items (a public example) holds one-digit numbers: the embedded tokenizer
spends a token per digit, and the first example's run is narrated item by item."""

Args = tuple[Any, ...]
LineSpec = tuple[str, str | None]  # (code of the function body, narration template or None)
StepSpec = tuple[str, str, tuple[LineSpec, ...]]  # (title, detail, lines)


@dataclass
class CodeTask(Task):
    """A code task: a :class:`Task` whose answer is a program. Adds the function's name, its signature, the
    program (the function definition, also ``answer``) and the first public example's call."""

    fn_name: str = ""
    signature: str = ""
    program: str = ""
    call: str = ""


@dataclass(frozen=True)
class CodeSpec:
    """One function of the family.

    ``steps`` are the function's body (lines indented relative to it) as titled steps and ``result`` the
    returned variable; ``reference`` is the independent implementation that gives the tests' outputs;
    ``draw(rng, size)`` makes random arguments of about ``size`` items; ``edges`` are edge-case arguments
    (always hidden tests); ``approaches[chosen]`` is the plan's choice, for ``reason``.
    """

    name: str
    level: int
    params: tuple[tuple[str, str], ...]
    returns: str
    does: str
    steps: tuple[StepSpec, ...]
    result: str
    reference: Callable[..., Any]
    draw: Callable[[random.Random, int], Args]
    edges: tuple[Args, ...]
    approaches: tuple[str, ...]
    chosen: int
    reason: str

    @property
    def signature(self) -> str:
        """``name(p: type, ...) -> type``."""
        params = ", ".join(f"{n}: {t}" for n, t in self.params)
        return f"{self.name}({params}) -> {self.returns}"


# ------------------------------------------------------------------------------------------ drawing
def _ints(rng: random.Random, n: int, lo: int = 0, hi: int = 40) -> list[int]:
    """``n`` numbers from ``lo`` to ``hi``, or to 9 in a short list (:data:`SHORT`)."""
    return [rng.randint(lo, hi if n > SHORT else 9) for _ in range(n)]


def _word(rng: random.Random, n: int, vowel_share: float = 0.4) -> str:
    """``n`` lowercase letters, about ``vowel_share`` of them vowels."""
    consonants = "bcdfghklmnprstvwz"
    return "".join(rng.choice("aeiou" if rng.random() < vowel_share else consonants) for _ in range(n))


def _palindrome_candidate(rng: random.Random, n: int) -> Args:
    """Half the time a palindrome (a word, maybe a middle letter, the word mirrored), else a plain word: both
    answers are common."""
    if rng.random() < 0.5:
        half = _word(rng, max(1, n // 2))
        middle = _word(rng, n % 2)
        return (half + middle + half[::-1],)
    return (_word(rng, n),)


def _runs(rng: random.Random, n: int) -> Args:
    """A string of about ``n`` characters made of runs of a, b and c (neighbouring runs differ)."""
    out, last = "", ""
    while len(out) < n:
        ch = rng.choice([c for c in "abc" if c != last])
        out += ch * rng.randint(1, 3)
        last = ch
    return (out,)


def _pairs_input(rng: random.Random, n: int) -> Args:
    """A list and a target that at least one pair of it sums to."""
    xs = _ints(rng, n, 0, 9)
    i, j = rng.sample(range(n), 2)
    return (xs, xs[i] + xs[j])


def _second_largest_input(rng: random.Random, n: int) -> Args:
    """Small values, so repeats (which the function must skip) are common."""
    return (_ints(rng, n, 0, 9),)


# -------------------------------------------------------------------------------------- references
# Each is another formulation than the steps, so a wrong step line cannot agree with it by construction.
def _sum_list(xs: list[int]) -> int:
    return functools.reduce(operator.add, xs, 0)


def _max_of_two(a: int, b: int) -> int:
    return sorted([a, b])[-1]


def _reverse_string(s: str) -> str:
    return "".join(reversed(s))


def _is_palindrome(s: str) -> bool:
    return all(s[i] == s[len(s) - 1 - i] for i in range(len(s) // 2))


def _count_vowels(s: str) -> int:
    return sum(map(set("aeiou").__contains__, s))


def _running_max(xs: list[int]) -> list[int]:
    return list(itertools.accumulate(xs, max))


def _filter_evens(xs: list[int]) -> list[int]:
    return [x for x in xs if not x & 1]


def _count_greater(xs: list[int], k: int) -> int:
    return len(xs) - sum(1 for x in xs if x <= k)


def _count_pairs(xs: list[int], target: int) -> int:
    return sum(1 for a, b in itertools.combinations(xs, 2) if a + b == target)


def _run_length(s: str) -> str:
    return "".join(f"{k}{sum(1 for _ in g)}" for k, g in itertools.groupby(s))


def _second_largest(xs: list[int]) -> int | None:
    top = heapq.nlargest(2, set(xs))
    return top[1] if len(top) == 2 else None


# ------------------------------------------------------------------------------------------ the specs
def _list_arg(rng: random.Random, n: int) -> Args:
    return (_ints(rng, n),)


SPECS: tuple[CodeSpec, ...] = (
    # level 1: one line
    CodeSpec(
        name="sum_list",
        level=1,
        params=(("xs", "list[int]"),),
        returns="int",
        does="returns the sum of the numbers in xs (0 for an empty list)",
        steps=(("Add up the list", "sum every number of xs", (("total = sum(xs)", None),)),),
        result="total",
        reference=_sum_list,
        draw=lambda rng, n: (_ints(rng, n, -9),),
        edges=(([],), ([7],), ([-3, -4],)),
        approaches=("add the numbers one by one in a loop", "use the built-in sum", "sort first, then add"),
        chosen=1,
        reason="it gives 0 for an empty list too",
    ),
    CodeSpec(
        name="max_of_two",
        level=1,
        params=(("a", "int"), ("b", "int")),
        returns="int",
        does="returns the larger of a and b",
        steps=(
            (
                "Compare the two numbers",
                "keep a when a >= b, else b",
                (("bigger = a if a >= b else b", None),),
            ),
        ),
        result="bigger",
        reference=_max_of_two,
        draw=lambda rng, n: (rng.randint(-20, 50), rng.randint(-20, 50)),
        edges=((4, 4), (-2, -7), (0, 1)),
        approaches=(
            "compare the two numbers directly",
            "sort the pair and take the last",
            "check the sign of a - b",
        ),
        chosen=0,
        reason="one comparison decides it",
    ),
    CodeSpec(
        name="reverse_string",
        level=1,
        params=(("s", "str"),),
        returns="str",
        does="returns s with its characters in reverse order",
        steps=(
            (
                "Reverse the string",
                "read s from its last character to its first",
                (("rev = s[::-1]", "Read backwards, rev = {rev!r}."),),
            ),
        ),
        result="rev",
        reference=_reverse_string,
        draw=lambda rng, n: (_word(rng, n + 1),),
        edges=(("",), ("a",), ("abba",)),
        approaches=(
            "build the result one character at a time",
            "slice s with step -1",
            "swap characters in a list",
        ),
        chosen=1,
        reason="a slice with step -1 reverses in one step",
    ),
    CodeSpec(
        name="is_palindrome",
        level=1,
        params=(("s", "str"),),
        returns="bool",
        does="returns True when s reads the same forwards and backwards, else False",
        steps=(
            (
                "Compare s with its reverse",
                "a palindrome equals s[::-1]",
                (("same = s == s[::-1]", None),),
            ),
        ),
        result="same",
        reference=_is_palindrome,
        draw=_palindrome_candidate,
        edges=(("",), ("x",), ("ab",)),
        approaches=("compare characters from both ends", "compare s with its reverse", "push s on a stack"),
        chosen=1,
        reason="comparing with the reverse is one line",
    ),
    # level 2: a loop with a condition
    CodeSpec(
        name="count_vowels",
        level=2,
        params=(("s", "str"),),
        returns="int",
        does="returns how many vowels (a, e, i, o, u) the lowercase string s contains",
        steps=(
            (
                "Count the vowels",
                "add 1 for every vowel of s",
                (
                    ("count = 0", None),
                    ("for ch in s:", None),
                    ('    if ch in "aeiou":', None),
                    ("        count = count + 1", "{ch} is a vowel:"),
                ),
            ),
        ),
        result="count",
        reference=_count_vowels,
        draw=lambda rng, n: (_word(rng, n),),
        edges=(("",), ("xyz",), ("aeiou",)),
        approaches=(
            "loop over the characters and count the vowels",
            "count each vowel with str.count",
            "use a regex",
        ),
        chosen=0,
        reason="one pass over s is enough",
    ),
    CodeSpec(
        name="running_max",
        level=2,
        params=(("xs", "list[int]"),),
        returns="list[int]",
        does="returns a list whose i-th item is the largest of xs[0], ..., xs[i] (an empty list for an empty xs)",
        steps=(
            (
                "Scan the list",
                "raise best when an item is larger; append best after each item",
                (
                    ("best = xs[0] if xs else 0", None),
                    ("out = []", None),
                    ("for x in xs:", None),
                    ("    if x > best:", None),
                    ("        best = x", None),
                    ("    out.append(best)", None),
                ),
            ),
        ),
        result="out",
        reference=_running_max,
        draw=_list_arg,
        edges=(([],), ([4],), ([5, 4, 3],)),
        approaches=("take max(xs[:i + 1]) for every i", "keep the best so far in one pass", "sort a copy"),
        chosen=1,
        reason="it needs one pass",
    ),
    CodeSpec(
        name="filter_evens",
        level=2,
        params=(("xs", "list[int]"),),
        returns="list[int]",
        does="returns the even numbers of xs in their original order",
        steps=(
            (
                "Keep each even number",
                "append the numbers of xs divisible by 2",
                (
                    ("evens = []", None),
                    ("for x in xs:", None),
                    ("    if x % 2 == 0:", None),
                    ("        evens.append(x)", "{x} is even, so evens = {evens}."),
                ),
            ),
        ),
        result="evens",
        reference=_filter_evens,
        draw=_list_arg,
        edges=(([],), ([1, 3, 5],), ([2],)),
        approaches=(
            "loop and keep the numbers divisible by 2",
            "sort by parity and cut",
            "remove the odd ones in place",
        ),
        chosen=0,
        reason="one pass keeps the order",
    ),
    CodeSpec(
        name="count_greater",
        level=2,
        params=(("xs", "list[int]"), ("k", "int")),
        returns="int",
        does="returns how many numbers in xs are greater than k",
        steps=(
            (
                "Count the numbers above k",
                "add 1 for each number of xs greater than k",
                (
                    ("count = 0", None),
                    ("for x in xs:", None),
                    ("    if x > k:", None),
                    ("        count = count + 1", None),
                ),
            ),
        ),
        result="count",
        reference=_count_greater,
        draw=lambda rng, n: (_ints(rng, n), rng.randint(0, 9 if n <= SHORT else 40)),
        edges=(([], 3), ([2, 2], 2), ([5], 0)),
        approaches=(
            "sort and search for k",
            "loop and count the numbers above k",
            "filter and take the length",
        ),
        chosen=1,
        reason="it needs one pass",
    ),
    # level 3: two steps or a nested loop
    CodeSpec(
        name="count_pairs",
        level=3,
        params=(("xs", "list[int]"), ("target", "int")),
        returns="int",
        does="returns how many pairs of positions i < j have xs[i] + xs[j] == target",
        steps=(
            ("Start the count at zero", "count = 0", (("count = 0", None),)),
            (
                "Check every pair",
                "for each item, add 1 for every later item that sums with it to target",
                (
                    ("for i in range(len(xs)):", None),
                    ("    a = xs[i]", None),
                    ("    for j in range(i + 1, len(xs)):", None),
                    ("        b = xs[j]", None),
                    ("        if a + b == target:", None),
                    ("            count = count + 1", None),
                ),
            ),
        ),
        result="count",
        reference=_count_pairs,
        draw=_pairs_input,
        edges=(([], 4), ([2], 4), ([2, 2, 2], 4)),
        approaches=(
            "check every pair with two loops",
            "count complements in a dictionary",
            "sort and use two pointers",
        ),
        chosen=0,
        reason="the lists are short, so two plain loops are clearest",
    ),
    CodeSpec(
        name="run_length",
        level=3,
        params=(("s", "str"),),
        returns="str",
        does=(
            "returns the run-length encoding of s: each run of equal neighbouring characters becomes the "
            "character followed by the run's length ('aab' gives 'a2b1'; '' gives '')"
        ),
        steps=(
            (
                "Group equal neighbours into runs",
                "extend the last run when the character repeats, else start a new run",
                (
                    ("runs = []", None),
                    ("for ch in s:", None),
                    ("    if runs and runs[-1][0] == ch:", None),
                    ("        runs[-1][1] = runs[-1][1] + 1", None),
                    ("    else:", None),
                    ("        runs.append([ch, 1])", None),
                ),
            ),
            (
                "Write each run as its character and length",
                "join the pieces",
                (('out = "".join(c + str(n) for c, n in runs)', "Joined, out = {out!r}."),),
            ),
        ),
        result="out",
        reference=_run_length,
        draw=_runs,
        edges=(("",), ("z",), ("abc",)),
        approaches=(
            "group the runs, then write them out",
            "compare each character with the next",
            "use a regex",
        ),
        chosen=0,
        reason="the runs are easy to check before writing them out",
    ),
    CodeSpec(
        name="second_largest",
        level=3,
        params=(("xs", "list[int]"),),
        returns="int | None",
        does="returns the second-largest distinct value in xs, or None when xs has fewer than two distinct values",
        steps=(
            ("Sort the distinct values", "sorted(set(xs))", (("uniq = sorted(set(xs))", None),)),
            (
                "Pick the second largest",
                "the one before the last, when there are two",
                (("second = uniq[-2] if len(uniq) >= 2 else None", None),),
            ),
        ),
        result="second",
        reference=_second_largest,
        draw=_second_largest_input,
        edges=(([],), ([3, 3],), ([1, 2],)),
        approaches=(
            "scan once keeping the two largest",
            "sort the distinct values",
            "remove the maximum, take the max",
        ),
        chosen=1,
        reason="sorting the distinct values handles the repeats",
    ),
)
LEVEL_SPECS: dict[int, tuple[CodeSpec, ...]] = {
    lv: tuple(s for s in SPECS if s.level == lv) for lv in (1, 2, 3)
}


# ------------------------------------------------------------------------------------------ the task
def call_text(name: str, args: Sequence[Any]) -> str:
    """A call as Python source: ``f('ab', [1, 2])``."""
    return f"{name}({', '.join(repr(a) for a in args)})"


def draw_tests(spec: CodeSpec, rng: random.Random) -> tuple[list[Args], list[Args]]:
    """Public and hidden arguments: ``PUBLIC_TESTS`` short random ones (the first, which is narrated, of the
    smallest size), then the spec's edge cases and larger random ones up to ``HIDDEN_TESTS``; no two alike."""
    seen: set[str] = set()

    def fresh(args: Args) -> bool:
        key = json.dumps(args)
        if key in seen:
            return False
        seen.add(key)
        return True

    public: list[Args] = []
    for _ in range(100):  # a handful of tries always suffice; the bound keeps a bad spec from spinning
        if len(public) == PUBLIC_TESTS:
            break
        # The first example is narrated: it gets the smallest size.
        args = spec.draw(rng, rng.randint(*PUBLIC_SIZES) if public else PUBLIC_SIZES[0])
        if fresh(args):
            public.append(args)
    hidden = [args for args in spec.edges[:HIDDEN_TESTS] if fresh(args)]
    for _ in range(100):
        if len(hidden) == HIDDEN_TESTS:
            break
        args = spec.draw(rng, rng.randint(*HIDDEN_SIZES))
        if fresh(args):
            hidden.append(args)
    return public, hidden


def expected_output(spec: CodeSpec, args: Args) -> Any:
    """The reference's value on ``args`` (on a copy: a reference never changes a test's arguments)."""
    return spec.reference(*copy.deepcopy(args))


def make_tests(spec: CodeSpec, public: Sequence[Args], hidden: Sequence[Args]) -> CodeTests:
    """The ``call`` tests of a task, public ones first, outputs from the independent reference."""
    tests = [CodeTest(args=tuple(a), output=expected_output(spec, a), public=True) for a in public]
    tests += [CodeTest(args=tuple(a), output=expected_output(spec, a)) for a in hidden]
    return CodeTests("call", tuple(tests), fn_name=spec.name, time_limit=TIME_LIMIT, compare="json")


def function_source(spec: CodeSpec) -> str:
    """The program: the function definition (the steps' lines, the return), as the answer. Its parameters go
    without the statement's type hints: about ten tokens fewer for a chain the embedded model must fit."""
    params = ", ".join(n for n, _ in spec.params)
    body = [f"    {code}" for _, _, lines in spec.steps for code, _ in lines]
    return "\n".join([f"def {spec.name}({params}):", *body, f"    return {spec.result}"]) + "\n"


def problem_text(spec: CodeSpec, public: Sequence[Args]) -> str:
    """The statement: the signature, what the function returns, and the public examples."""
    examples = [f"{call_text(spec.name, a)} == {expected_output(spec, a)!r}" for a in public]
    return f"Write a Python function `{spec.signature}` that {spec.does}.\n\nExamples:\n" + "\n".join(
        examples
    )


def task_steps(spec: CodeSpec, args: Args) -> list[Step]:
    """The steps of ``solve()``: the first example's arguments bound in one line first, then the body."""
    steps = [
        Step(title, detail, [Line(code, say) for code, say in lines]) for title, detail, lines in spec.steps
    ]
    names = ", ".join(n for n, _ in spec.params)
    values = ", ".join(repr(a) for a in args)
    # The template is str.format'ed: a literal's braces are escaped.
    say = f"First example: {names} = {values}.".replace("{", "{{").replace("}", "}}")
    steps[0].lines = [Line(f"{names} = {values}", say), *steps[0].lines]
    return steps


def code(rng: random.Random, level: int) -> CodeTask:
    """A code task at ``level`` (1-3): one of the level's functions, its public and hidden tests (the gold is
    their JSON), and its program as the answer."""
    spec = LEVEL_SPECS[level][rng.randrange(len(LEVEL_SPECS[level]))]
    public, hidden = draw_tests(spec, rng)
    tests = make_tests(spec, public, hidden)
    program = function_source(spec)
    return CodeTask(
        FAMILY,
        level,
        problem_text(spec, public),
        program,
        tests.tests[0].output,
        task_steps(spec, public[0]),
        spec.result,
        list(spec.approaches),
        spec.chosen,
        spec.reason,
        kind="code",
        gold=tests.dumps(),
        fn_name=spec.name,
        signature=spec.signature,
        program=program,
        call=call_text(spec.name, public[0]),
    )


# ------------------------------------------------------------------------------------------ the texts
def code_plan(task: CodeTask) -> str:
    """The exploration: the approaches, the choice and why, the steps, then writing the function."""
    lines = [PLAN_OPENER, "Candidate approaches:", *[f"- {a}" for a in task.approaches]]
    lines.append(f"I will {task.approaches[task.chosen]}, because {task.reason}.")
    lines += [f"{i}. {st.title}: {st.detail}." for i, st in enumerate(task.steps, 1)]
    lines.append(f"{len(task.steps) + 1}. Write the function: def {task.fn_name}, returning {task.result}.")
    return "\n".join(lines)


# "Check ch in "aeiou" with ch in "aeiou": true." says the condition twice when no integer could be
# substituted into it (a string test): once is enough.
_SAME_CHECK = re.compile(r"^Check (.+?) with \1: ", re.M)


def code_execution(task: CodeTask, trace: TraceResult) -> str:
    """The execution: the traced run on the first public example, step by step, then the function in a
    fenced ``python`` block (the answer). The value said is the trace's."""
    paras, state = execution_steps(task, trace)
    value = state.get(task.result, trace.value)
    tail = (
        f"Step {len(task.steps) + 1}: Write the function.\n"
        f"The result {value!r} matches the example. The function:\n"
        f"```python\n{task.program}```"
    )
    return _SAME_CHECK.sub(r"Check \1: ", "\n\n".join([*paras, tail]))
