"""A hostile corpus for graders: responses built to crash, hang or fool answer extraction and checking.

Used by the tests (every entry must grade to a defined reason within its bound) and by
``bench/grader.py --hostile`` (worst-case seconds per response). Each entry is a :class:`Hostile` with a
name, the response, a reference answer and the answer kind. Sizes reach a megabyte; building the whole
corpus takes well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MB = 1 << 20


@dataclass(frozen=True)
class Hostile:
    """One hostile case."""

    name: str
    response: str
    gold: Any
    kind: str = "math"
    options: dict[str, str] | None = None


_CODE_TESTS = {"mode": "call", "fn_name": "f", "time_limit": 1.0, "tests": [{"args": [1], "output": 1}]}


def _py(body: str) -> str:
    return f"```python\n{body}```\n"


def _chain(execution: str, plan: str = "1. Compute.\n2. Report.") -> str:
    return f"{plan}</EXPLORATION><EXECUTION>{execution}</EXECUTION>"


def _nest(open_: str, close: str, depth: int, core: str = "1") -> str:
    return open_ * depth + core + close * depth


def _towers(depth: int = 1400) -> str:
    tower = _nest("\\boxed{", "}", depth)
    return tower * (MB // len(tower))


_OPTS = {"A": "Aspirin", "B": "Heparin", "C": "Warfarin", "D": "Clopidogrel"}


def hostile_corpus() -> list[Hostile]:
    """Every hostile case, in a fixed order."""
    half = "\\frac{1}{2}"
    cases: list[Hostile] = [
        # Huge literals: the fast numeric path must neither overflow a float nor expand giant integers.
        Hostile("huge_exponent", _chain("\\boxed{1e5000}"), half),
        Hostile("huge_exponent_equal", _chain("\\boxed{10e4999}"), "1e5000"),
        Hostile("giga_exponent", _chain("\\boxed{1e999999999}"), "2"),
        Hostile("giga_negative_exponent", _chain("\\boxed{1e-999999999}"), "0"),
        Hostile("exponent_digits", _chain("\\boxed{1e" + "9" * 5000 + "}"), "1"),
        Hostile("long_integer", _chain("\\boxed{" + "7" * 5000 + "}"), "7"),
        Hostile("megadigit_integer", _chain("\\boxed{" + "9" * MB + "}"), "9"),
        Hostile("long_decimal", _chain("\\boxed{0." + "0" * 5000 + "1}"), "0"),
        Hostile("huge_fraction", _chain("\\boxed{" + "9" * 5000 + "/7}"), "3"),
        Hostile("huge_latex_fraction", _chain("\\boxed{\\frac{" + "9" * 5000 + "}{3}}"), "3"),
        Hostile("huge_percent", _chain("\\boxed{1e5000\\%}"), "0.5"),
        Hostile("huge_gold", _chain("\\boxed{3}"), "1e5000"),
        # Towers and expressions whose value cannot be computed.
        Hostile("power_tower", _chain("\\boxed{" + _nest("2^{", "}", 12, "2") + "}"), "4"),
        Hostile("ten_tower", _chain("\\boxed{10^{10^{10^{10^{10}}}}}"), "10"),
        Hostile("factorial_tower", _chain("\\boxed{((10^{100})!)!}"), "1"),
        Hostile("big_power_polynomial", _chain("\\boxed{(x+1)^{100000}}"), "x+1"),
        Hostile("huge_sum", _chain("\\boxed{\\sum_{i=1}^{10^{12}} i^{i}}"), "5"),
        # Deep nesting.
        Hostile("nested_braces", _chain("\\boxed{" + _nest("{", "}", 50_000) + "}"), "1"),
        Hostile("nested_parens", _chain("\\boxed{" + _nest("(", ")", 50_000) + "}"), "1"),
        Hostile("nested_fracs", _chain("\\boxed{" + _nest("\\frac{1}{", "}", 2_000) + "}"), "1"),
        Hostile("nested_sqrt", _chain("\\boxed{" + _nest("\\sqrt{", "}", 5_000, "2") + "}"), "2"),
        Hostile("nested_boxes", _chain(_nest("\\boxed{", "}", 50_000)), "1"),
        Hostile("unclosed_boxes", _chain("\\boxed{" * 50_000), "1"),
        Hostile("unbalanced_braces", _chain("\\boxed{1}" + "}" * 100_000 + "{" * 100_000), "1"),
        # A megabyte of towers of nested boxes, each short enough to be kept: boxed_contents must not copy
        # every box's content, which is quadratic (seconds spent outside any timeout).
        Hostile("nested_box_towers", _chain(_towers()), "1"),
        Hostile("mcq_nested_box_towers", _chain(_towers()), "B", "mcq", _OPTS),
        Hostile(
            "left_right_flood", _chain("\\boxed{" + "\\left(" * 20_000 + "1" + "\\right)" * 20_000 + "}"), "1"
        ),
        # Many answers.
        Hostile("thousands_of_boxes", _chain("\\boxed{1} " * 20_000 + "\\boxed{2}"), "2"),
        Hostile("bare_boxes", _chain("\\boxed 1 " * 50_000), "1"),
        Hostile("many_phrases", _chain("the answer is 3. " * 50_000), "3"),
        Hostile("many_gsm_markers", _chain("#" * MB), "1"),
        # Megabyte texts and long blank runs (regex backtracking).
        Hostile("megabyte_letters", _chain("a" * MB), "1"),
        Hostile("megabyte_spaces", _chain(" " * MB), "1"),
        Hostile("megabyte_untagged", "x " * (MB // 2) + "\\boxed{1}", "1"),
        Hostile("phrase_then_blanks", _chain("the answer is x" + " " * MB + "y"), "x"),
        Hostile("gsm_then_blanks", _chain("#### " + " " * MB), "1"),
        Hostile("final_answer_blanks", _chain("final answer" + " " * MB + "z"), "1"),
        Hostile("plan_step_blanks", " " * MB + "x</EXPLORATION><EXECUTION>\\boxed{1}</EXECUTION>", "1"),
        Hostile(
            "plan_many_steps",
            "\n".join(f"{i}. step {i}" for i in range(100_000)) + _chain("\\boxed{1}", ""),
            "1",
        ),
        Hostile(
            "execution_many_steps",
            _chain("\n".join(f"Step {i}: x{i}" for i in range(100_000)) + "\\boxed{1}"),
            "1",
        ),
        # Control characters and unicode.
        Hostile("null_bytes", _chain("\x00" * MB + "\\boxed{1}"), "1"),
        Hostile("null_in_box", _chain("\\boxed{1\x00}"), "1"),
        Hostile("lone_surrogate", _chain("\\boxed{\ud800}"), "1"),
        Hostile("rtl_and_combining", _chain("\\boxed{\u202e1\u0301\u200d}"), "1"),
        Hostile("emoji_box", _chain("\\boxed{🙂" * 1000 + "}" * 1000), "1"),
        Hostile("arabic_digits", _chain("\\boxed{٣}"), "3"),
        Hostile("fullwidth_digits", _chain("\\boxed{３}"), "3"),
        Hostile("unicode_fraction", _chain("\\boxed{½}"), half),
        # Matrices and structures.
        Hostile(
            "big_matrix",
            _chain(
                "\\boxed{\\begin{pmatrix}"
                + "\\\\".join("&".join(["1"] * 60) for _ in range(60))
                + "\\end{pmatrix}}"
            ),
            "1",
        ),
        Hostile(
            "big_set", _chain("\\boxed{\\{" + ",".join(str(i) for i in range(20_000)) + "\\}}"), "\\{1,2\\}"
        ),
        Hostile(
            "interval_flood",
            _chain("\\boxed{" + "\\cup".join(f"[{i},{i + 1}]" for i in range(5_000)) + "}"),
            "[0,1]",
        ),
        # Tags in odd places.
        Hostile("tag_flood", "</EXPLORATION><EXECUTION>" * 50_000 + "\\boxed{1}", "1"),
        Hostile("tags_in_box", _chain("\\boxed{</EXECUTION>1}"), "1"),
        Hostile("answer_only_in_plan", "\\boxed{42}</EXPLORATION><EXECUTION>Step 1: compute...", "42"),
        # Multiple choice.
        Hostile("mcq_paren_flood", _chain("The answer is " + "(" * 100_000 + "B"), "B", "mcq", _OPTS),
        Hostile("mcq_blank_flood", _chain("Answer:" + " " * MB + "B"), "B", "mcq", _OPTS),
        Hostile("mcq_option_flood", _chain("option " * 200_000), "B", "mcq", _OPTS),
        Hostile(
            "mcq_statement_then_mention",
            _chain("The answer is D. Option A is wrong because"),
            "D",
            "mcq",
            _OPTS,
        ),
        Hostile("mcq_megabyte_last_line", _chain("x" * MB), "B", "mcq", _OPTS),
        Hostile("mcq_many_boxes", _chain("\\boxed{Z} " * 50_000), "B", "mcq", _OPTS),
        # Countdown expressions.
        Hostile(
            "countdown_nesting",
            _chain("\\boxed{" + _nest("(", ")", 10_000) + "}"),
            {"target": 1, "numbers": [1]},
            "countdown",
        ),
        Hostile(
            "countdown_long",
            _chain("\\boxed{" + "+".join(["1"] * 100_000) + "}"),
            {"target": 3, "numbers": [1, 2]},
            "countdown",
        ),
        Hostile("countdown_power", _chain("\\boxed{9**9**9**9}"), {"target": 3, "numbers": [9]}, "countdown"),
        # Programs (the code kind): extraction on fence floods, programs that are bombs, references that
        # are not tests. Each runs in the sandbox under its tests' time limit.
        Hostile("code_fence_flood", _chain("```\n" * 200_000), _CODE_TESTS, "code"),
        Hostile("code_unclosed_megabyte", _chain("```python\n" + "x = 1\n" * (MB // 6)), _CODE_TESTS, "code"),
        Hostile("code_megabyte_program", _chain(_py("x = 1\n" * (MB // 6))), _CODE_TESTS, "code"),
        Hostile("code_null_bytes", _chain(_py("def f(x):\n    return x\x00\n")), _CODE_TESTS, "code"),
        Hostile("code_huge_literal", _chain(_py("def f(x):\n    return 10**10**8\n")), _CODE_TESTS, "code"),
        Hostile(
            "code_print_flood",
            _chain(_py("def f(x):\n    print('x' * 10**6)\n    return x\n")),
            _CODE_TESTS,
            "code",
        ),
        Hostile(
            "code_deep_nesting",
            _chain(_py("def f(x):\n    return " + _nest("[", "]", 100_000) + "\n")),
            _CODE_TESTS,
            "code",
        ),
        Hostile("code_tests_nesting", _chain(_py("def f(x): return x")), _nest("[", "]", 100_000), "code"),
        Hostile(
            "code_tests_not_tests", _chain(_py("def f(x): return x")), {"mode": "call", "tests": []}, "code"
        ),
    ]
    return cases
