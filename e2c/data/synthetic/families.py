"""Synthetic task families: a problem, its answer, a plan, and a reference program, at difficulty 1-3.

Each family is a function ``(rng, level) -> Task``. The answer is computed here *independently* of the
reference program (with the standard library: ``math.gcd``, ``pow``, ``math.comb``, direct formulas);
the program is later run under the tracer and its result must agree, or the sample is dropped.

A program is a list of steps; each step is a titled list of lines of the body of ``solve()``, and a line
may carry a narration template (``str.format`` over the variables after the line ran). Lines without one
are narrated generically (see :mod:`e2c.data.synthetic.narrate`).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
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


def _pick(rng: random.Random, options: list[str]) -> str:
    return options[rng.randrange(len(options))]


# ---------------------------------------------------------------------------------------- families
def arithmetic(rng: random.Random, level: int) -> Task:
    crates, per = rng.randint(3, 9 * level), rng.randint(4, 12 + 4 * level)
    shipped = rng.randint(1, crates * per - 1)
    more = rng.randint(2, 5 + level)
    thing, place = (
        _pick(rng, ["books", "apples", "bolts", "cans", "pens"]),
        _pick(rng, ["shop", "warehouse", "depot"]),
    )
    steps = [
        Step("Count the starting items", f"multiply the {crates} boxes by {per} {thing} per box",
             [Line("items = crates * per_box", "{crates} boxes with {per_box} each give items = {items}.")]),
        Step("Remove the shipped items", f"subtract the {shipped} {thing} shipped",
             [Line("items = items - shipped", "After shipping {shipped}, items = {items}.")]),
    ]  # fmt: skip
    text = f"A {place} has {crates} boxes with {per} {thing} in each box. It ships out {shipped} {thing}."
    total = crates * per - shipped
    pre = [Line(f"crates = {crates}"), Line(f"per_box = {per}"), Line(f"shipped = {shipped}")]
    if level >= 2:
        steps.append(Step("Add the new boxes", f"add {more} new boxes of {per}",
                          [Line(f"new_items = {more} * per_box"), Line("items = items + new_items")]))  # fmt: skip
        text += f" Then {more} more boxes of {per} {thing} arrive."
        total += more * per
    result = "items"
    if level >= 3:
        divisors = [d for d in range(2, 10) if total % d == 0]
        if divisors:
            stores = rng.choice(divisors)
            steps.append(Step("Share the items equally among the stores", f"divide the total by {stores}",
                              [Line(f"stores = {stores}"), Line("each = items // stores")]))  # fmt: skip
            text += f" The {thing} are then shared equally among {stores} stores. How many {thing} does each store get?"
            total //= stores
            result = "each"
    if result == "items":
        text += f" How many {thing} does the {place} have now?"
    steps[0].lines = pre + steps[0].lines
    return Task("arithmetic", level, text, str(total), total, steps, result,
                ["add up every box one at a time", "track the running total after each event",
                 "write one expression for everything and simplify it"], 1,
                "it keeps each intermediate number small and easy to check")  # fmt: skip


def linear_equation(rng: random.Random, level: int) -> Task:
    x = rng.randint(-12, 15)
    if level <= 2:
        a = rng.choice([n for n in range(-9, 10) if n not in (0, 1)])
        c = rng.choice([n for n in range(-6, 7) if n != a]) if level == 2 else 0
        b, d = rng.randint(-30, 30), 0
        d = a * x + b - c * x
        lhs = f"{a}x + {b}".replace("+ -", "- ")
        rhs = f"{c}x + {d}".replace("+ -", "- ") if c else str(d)
        steps = [
            Step("Collect the x terms on the left", f"subtract {c}x from both sides" if c else "the x terms are already on the left",
                 [Line(f"a, b, c, d = {a}, {b}, {c}, {d}"), Line("coef = a - c", "The coefficient of x is a - c = {coef}.")]),
            Step("Collect the constants on the right", f"move {b} to the right side",
                 [Line("const = d - b", "The constant side is d - b = {const}.")]),
            Step("Divide by the coefficient", "x is the constant divided by the coefficient",
                 [Line("x = const // coef", "So x = {const} / {coef} = {x}."),
                  Line("check = a * x + b == c * x + d", "Substituting back, both sides agree: {check}.")]),
        ]  # fmt: skip
        problem = f"Solve for x: {lhs} = {rhs}."
        return Task("linear_equation", level, problem, str(x), x, steps, "x",
                    ["guess values of x until both sides match", "isolate x by balancing both sides",
                     "graph both sides and find the crossing"], 1, "it is exact and needs only a few operations")  # fmt: skip
    y = rng.randint(-9, 12)
    while True:
        a1, b1, a2, b2 = (rng.randint(-7, 7) for _ in range(4))
        if a1 and b1 and a2 and b2 and a1 * b2 - a2 * b1 != 0:
            break
    c1, c2 = a1 * x + b1 * y, a2 * x + b2 * y
    e1 = f"{a1}x + {b1}y = {c1}".replace("+ -", "- ")
    e2 = f"{a2}x + {b2}y = {c2}".replace("+ -", "- ")
    steps = [
        Step("Compute the determinant", "the system has one solution when a1*b2 - a2*b1 is not zero",
             [Line(f"a1, b1, c1 = {a1}, {b1}, {c1}"), Line(f"a2, b2, c2 = {a2}, {b2}, {c2}"),
              Line("det = a1 * b2 - a2 * b1")]),
        Step("Solve for x with Cramer's rule", "x = (c1*b2 - c2*b1) / det",
             [Line("x = (c1 * b2 - c2 * b1) // det")]),
        Step("Solve for y and check", "y = (a1*c2 - a2*c1) / det, then substitute back",
             [Line("y = (a1 * c2 - a2 * c1) // det"), Line("ok = a1 * x + b1 * y == c1 and a2 * x + b2 * y == c2")]),
    ]  # fmt: skip
    problem = f"Solve the system {e1} and {e2}. What is x?"
    return Task("linear_equation", level, problem, str(x), x, steps, "x",
                ["substitute one equation into the other", "eliminate with Cramer's rule",
                 "try integer pairs"], 1, "it gives x directly from the coefficients")  # fmt: skip


def modular(rng: random.Random, level: int) -> Task:
    m = rng.randint(7, 20 + 30 * level)
    a = rng.randint(2, 3 * m)
    e = rng.randint(2 ** (1 + 2 * level), 2 ** (3 + 2 * level))
    steps = [
        Step("Set up the result and the reduced base", f"start with result 1 and base {a} mod {m}",
             [Line(f"m = {m}"), Line(f"base = {a} % m", "Reduce the base:"), Line(f"exp = {e}"), Line("result = 1")]),
        Step("Square and multiply over the bits of the exponent",
             "when the lowest bit is 1 multiply the result by the base; square the base; halve the exponent",
             [Line("while exp > 0:"), Line("    if exp % 2 == 1:"),
              Line("        result = result * base % m", "The bit is 1, so multiply:"),
              Line("    base = base * base % m", "Square the base:"),
              Line("    exp = exp // 2", "Halve the exponent:")]),
    ]  # fmt: skip
    ans = pow(a, e, m)
    return Task("modular", level, f"What is the remainder when {a}^{e} is divided by {m}?", str(ans), ans, steps,
                "result", ["compute the full power and divide", "square and multiply modulo m",
                           "look for a cycle in the powers"], 1,
                "the numbers stay below m at every step")  # fmt: skip


def gcd_lcm(rng: random.Random, level: int) -> Task:
    g = rng.randint(2, 6 + 4 * level)
    a, b = g * rng.randint(2, 9 * level), g * rng.randint(2, 9 * level)
    euclid = [Line("while b != 0:"), Line("    a, b = b, a % b", "Replace (a, b) by (b, a mod b):")]
    if level == 1:
        steps = [Step("Set up the two numbers", f"a = {a}, b = {b}", [Line(f"a, b = {a}, {b}")]),
                 Step("Apply the Euclidean algorithm", "replace (a, b) by (b, a mod b) until b is 0", euclid)]  # fmt: skip
        return Task("gcd_lcm", level, f"What is the greatest common divisor of {a} and {b}?",
                    str(math.gcd(a, b)), math.gcd(a, b), steps, "a",
                    ["list all divisors of both numbers", "use the Euclidean algorithm", "factor both into primes"],
                    1, "it needs only a few divisions")  # fmt: skip
    if level == 2:
        lcm = a * b // math.gcd(a, b)
        steps = [Step("Set up the two numbers", f"keep a copy of the product {a} * {b}",
                      [Line(f"a, b = {a}, {b}"), Line("product = a * b")]),
                 Step("Find the gcd with the Euclidean algorithm", "replace (a, b) by (b, a mod b) until b is 0", euclid),
                 Step("Divide the product by the gcd", "lcm = a*b / gcd",
                      [Line("lcm = product // a", "The lcm is {product} / {a} = {lcm}.")])]  # fmt: skip
        return Task("gcd_lcm", level, f"What is the least common multiple of {a} and {b}?", str(lcm), lcm, steps,
                    "lcm", ["list multiples until they meet", "use lcm = a*b / gcd(a, b)", "factor both into primes"],
                    1, "the gcd is quick to find and the formula is exact")  # fmt: skip
    c = g * rng.randint(2, 9 * level)
    ans = math.gcd(math.gcd(a, b), c)
    steps = [Step("Find the gcd of the first two numbers", f"Euclid on {a} and {b}", [Line(f"a, b = {a}, {b}"), *euclid]),
             Step("Take the gcd with the third number", f"Euclid on that gcd and {c}",
                  [Line(f"b = {c}", "Bring in the third number: b = {b}."), *euclid])]  # fmt: skip
    return Task("gcd_lcm", level, f"What is the greatest common divisor of {a}, {b} and {c}?", str(ans), ans, steps,
                "a", ["list all common divisors", "apply the Euclidean algorithm twice", "factor into primes"],
                1, "gcd(a, b, c) = gcd(gcd(a, b), c)")  # fmt: skip


def counting(rng: random.Random, level: int) -> Task:
    if level == 1:
        n = rng.randint(30, 300)
        p, q = rng.sample([2, 3, 4, 5, 6, 7, 9, 10, 11], 2)
        lcm = p * q // math.gcd(p, q)
        ans = n // p + n // q - n // lcm
        steps = [Step("Count the multiples of each number", f"floor({n}/{p}) and floor({n}/{q})",
                      [Line(f"n, p, q = {n}, {p}, {q}"), Line("count_p = n // p"), Line("count_q = n // q")]),
                 Step("Count the multiples of both", "multiples of the lcm were counted twice",
                      [Line("a, b = p, q"), Line("while b != 0:"), Line("    a, b = b, a % b"),
                       Line("lcm = p * q // a", "The lcm of {p} and {q} is {lcm}."), Line("count_both = n // lcm")]),
                 Step("Apply inclusion-exclusion", "add the two counts and subtract the overlap",
                      [Line("total = count_p + count_q - count_both", "{count_p} + {count_q} - {count_both} = {total}.")])]  # fmt: skip
        return Task("counting", level, f"How many integers from 1 to {n} are divisible by {p} or {q}?", str(ans),
                    ans, steps, "total", ["check every number one by one", "use inclusion-exclusion",
                                          "count the complement"], 1, "it needs three divisions instead of a scan")  # fmt: skip
    if level == 2:
        n = rng.randint(5, 14)
        k = rng.randint(2, min(6, n - 1))
        problem = f"In how many ways can a committee of {k} be chosen from {n} people?"
        top, kk = n, k
    else:
        candies, kids = rng.randint(4, 12), rng.randint(2, 5)
        problem = f"In how many ways can {candies} identical candies be shared among {kids} children (a child may get none)?"
        top, kk = candies + kids - 1, kids - 1
    ans = math.comb(top, kk)
    steps = [Step("Reduce to a binomial coefficient", f"the answer is C({top}, {kk})",
                  [Line(f"n, k = {top}, {kk}")]),
             Step("Build the coefficient one factor at a time", "multiply by (n - k + i) and divide by i for i = 1..k",
                  [Line("c = 1"), Line("for i in range(1, k + 1):"),
                   Line("    c = c * (n - k + i) // i", "For i = {i}:")])]  # fmt: skip
    return Task("counting", level, problem, str(ans), ans, steps, "c",
                ["list every arrangement", "use a binomial coefficient", "build a recursion table"], 1,
                "the count is a standard binomial coefficient")  # fmt: skip


def sequence(rng: random.Random, level: int) -> Task:
    if level == 1:
        a1, d, n = rng.randint(-5, 20), rng.randint(-4, 9), rng.randint(4, 9)
        ans = n * (2 * a1 + (n - 1) * d) // 2
        steps = [Step("Start with the first term", f"term = {a1}, total = 0",
                      [Line(f"term, d, n = {a1}, {d}, {n}"), Line("total = 0")]),
                 Step("Add the terms one by one", "add the term to the total, then step by the difference",
                      [Line("for i in range(n):"), Line("    total = total + term", "Add the term:"),
                       Line("    term = term + d")])]  # fmt: skip
        return Task("sequence", level, f"An arithmetic sequence starts at {a1} with common difference {d}. "
                    f"What is the sum of its first {n} terms?", str(ans), ans, steps, "total",
                    ["use the closed-form sum formula", "add the terms one by one", "pair first and last terms"],
                    1, "it is easy to check each term")  # fmt: skip
    if level == 2:
        a0, r, s, k = rng.randint(1, 6), rng.randint(2, 3), rng.randint(-3, 5), rng.randint(4, 7)
        ans = a0
        for _ in range(k):
            ans = r * ans + s
        steps = [Step("Set the first term", f"a_0 = {a0}", [Line(f"a, r, s = {a0}, {r}, {s}")]),
                 Step("Apply the recurrence", f"apply a -> {r}a + {s} {k} times",
                      [Line(f"for n in range(1, {k + 1}):"), Line("    a = r * a + s", "a_{n}:")])]  # fmt: skip
        return Task("sequence", level, f"A sequence has a_0 = {a0} and a_(n+1) = {r}a_n + {s}. What is a_{k}?".replace("+ -", "- "),
                    str(ans), ans, steps, "a", ["find a closed form", "iterate the recurrence", "guess a pattern"],
                    1, "only a few terms are needed")  # fmt: skip
    f0, f1, k, m = rng.randint(0, 5), rng.randint(1, 7), rng.randint(6, 12), rng.randint(7, 31)
    x, y = f0, f1
    for _ in range(k - 1):
        x, y = y, (x + y) % m
    steps = [Step("Set the two seed terms", f"f_0 = {f0}, f_1 = {f1}", [Line(f"prev, cur, m = {f0}, {f1}, {m}")]),
             Step("Roll the pair forward modulo m", "replace (prev, cur) by (cur, (prev + cur) mod m)",
                  [Line(f"for n in range(2, {k + 1}):"), Line("    prev, cur = cur, (prev + cur) % m", "f_{n}:")])]  # fmt: skip
    return Task("sequence", level, f"Let f_0 = {f0}, f_1 = {f1} and f_n = (f_(n-1) + f_(n-2)) mod {m}. What is f_{k}?",
                str(y), y, steps, "cur", ["find the period of the sequence", "compute the terms in order",
                                          "use matrix powers"], 1, "k is small, so direct computation is fastest")  # fmt: skip


def list_ops(rng: random.Random, level: int) -> Task:
    xs = [rng.randint(1, 60) for _ in range(4 + 2 * level)]
    shown = ", ".join(map(str, xs))
    if level == 1:
        ans = sum(x for x in xs if x % 2 == 0)
        steps = [Step("Start with an empty sum", "total = 0", [Line(f"xs = [{shown}]"), Line("total = 0")]),
                 Step("Add each even number", "go through the list and add the numbers divisible by 2",
                      [Line("for x in xs:"), Line("    if x % 2 == 0:"),
                       Line("        total = total + x", "{x} is even:")])]  # fmt: skip
        return Task("list_ops", level, f"What is the sum of the even numbers in the list [{shown}]?", str(ans), ans,
                    steps, "total", ["sort first, then add", "scan once and add the even numbers", "count then multiply"],
                    1, "one pass over the list is enough")  # fmt: skip
    if level == 2:
        ans = sum(sorted(xs)[-3:])
        steps = [Step("Sort the list", "sort in increasing order", [Line(f"xs = [{shown}]"), Line("ordered = sorted(xs)")]),
                 Step("Take the three largest", "the last three of the sorted list", [Line("top = ordered[-3:]")]),
                 Step("Add them", "sum the three", [Line("total = sum(top)", "{top[0]} + {top[1]} + {top[2]} = {total}.")])]  # fmt: skip
        return Task("list_ops", level, f"What is the sum of the three largest numbers in [{shown}]?", str(ans), ans,
                    steps, "total", ["scan three times for the maximum", "sort and take the last three",
                                     "use a running top-three"], 1, "sorting makes the choice obvious")  # fmt: skip
    t = sorted(set(xs))[len(set(xs)) // 3]
    kept = sorted(x for x in set(xs) if x > t)
    if len(kept) < 2:
        return list_ops(rng, 2)
    ans = kept[0] * kept[1]
    steps = [Step("Remove duplicates and sort", "sort the distinct values",
                  [Line(f"xs = [{shown}]"), Line("uniq = sorted(set(xs))")]),
             Step(f"Keep the values greater than {t}", "filter the sorted list",
                  [Line(f"kept = [x for x in uniq if x > {t}]")]),
             Step("Multiply the two smallest kept values", "the first two of the filtered list",
                  [Line("product = kept[0] * kept[1]", "{kept[0]} * {kept[1]} = {product}.")])]  # fmt: skip
    return Task("list_ops", level, f"From the list [{shown}], remove duplicates and keep only the numbers greater "
                f"than {t}. What is the product of the two smallest numbers left?", str(ans), ans, steps, "product",
                ["scan repeatedly for minima", "sort the distinct values, then filter", "use a heap"], 1,
                "after sorting the two smallest are the first two")  # fmt: skip


def countdown(rng: random.Random, level: int) -> Task:
    count = 2 + level
    while True:
        nums = [rng.randint(1, 12) for _ in range(count)]
        order = list(range(count))
        rng.shuffle(order)
        value, expr = nums[order[0]], str(nums[order[0]])
        lines: list[Line] = []
        ok = True
        for j, idx in enumerate(order[1:], 1):
            n = nums[idx]
            ops = ["+", "*", "-"] + (["/"] if value % n == 0 else [])
            op = rng.choice(ops)
            new = {"+": value + n, "-": value - n, "*": value * n, "/": value // n if n else 0}[op]
            if new < 0 or (op == "*" and new > 500):
                ok = False
                break
            prev = f"t{j - 1}" if j > 1 else str(value)
            pyop = "//" if op == "/" else op
            lines.append(Line(f"t{j} = {prev} {pyop} {n}", f"Combine with {n} using {op}:"))
            expr = f"({expr}) {op} {n}" if j > 1 and op in "*/" else f"{expr} {op} {n}"
            value = new
        if ok and value > 0:
            break
    target = value
    steps = [Step(f"Combine the numbers in the order {', '.join(str(nums[i]) for i in order)}",
                  "apply each operation to the running value", lines),
             Step("Confirm the target is reached", f"the last value must be {target}",
                  [Line(f"reached = t{count - 1} == {target}", "The value equals the target: {reached}."),
                   Line(f"value = t{count - 1}")])]  # fmt: skip
    problem = (f"Using each of the numbers {', '.join(map(str, nums))} exactly once, with +, -, * and / "
               f"(and parentheses), make {target}. Give the expression.")  # fmt: skip
    gold = json.dumps({"target": target, "numbers": nums})
    return Task("countdown", level, problem, expr, target, steps, "value",
                ["try every order and operation", "build up from the numbers toward the target",
                 "work backwards from the target"], 1, "a short chain of operations reaches it",
                kind="countdown", gold=gold, numbers=nums)  # fmt: skip


def small_arithmetic(rng: random.Random, level: int) -> Task:
    """Equal groups, sized for ~100M-parameter models: every step is a one-digit product (2-9 times 2-9), then
    a sum with a one-digit number (level 2) or with a second product (level 3)."""
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    name, thing = _pick(rng, ["Mia", "Sam", "Ana", "Leo", "Kim"]), _pick(rng, ["marbles", "stickers", "cookies", "shells"])  # fmt: skip
    holder = _pick(rng, ["bags", "boxes", "jars"])
    text = f"{name} has {a} {holder} with {b} {thing} in each."
    steps = [Step("Count the items in the groups", f"multiply {a} {holder} by {b} {thing} each",
                  [Line(f"groups, each = {a}, {b}"), Line("total = groups * each")])]  # fmt: skip
    total = a * b
    if level == 2:
        c = rng.randint(1, 9)
        text += f" {name} also has {c} loose {thing}."
        steps.append(Step("Add the loose items", f"add the {c} loose {thing}",
                          [Line(f"loose = {c}"), Line("total = total + loose")]))  # fmt: skip
        total += c
    elif level >= 3:
        c, d = rng.randint(2, 9), rng.randint(2, 9)
        text += f" {name} also has {c} more {holder} with {d} {thing} in each."
        steps.append(Step("Count the second groups and add them", f"multiply {c} by {d}, then add",
                          [Line(f"more = {c} * {d}"), Line("total = total + more")]))  # fmt: skip
        total += c * d
    text += f" How many {thing} does {name} have in all?"
    return Task("small_arithmetic", level, text, str(total), total, steps, "total",
                ["count the items one by one", "multiply the groups by the size of each group",
                 "add the groups one at a time"], 1, "equal groups are counted fastest by multiplying")  # fmt: skip


FAMILIES: dict[str, Callable[[random.Random, int], Task]] = {
    "arithmetic": arithmetic,
    "linear_equation": linear_equation,
    "modular": modular,
    "gcd_lcm": gcd_lcm,
    "counting": counting,
    "sequence": sequence,
    "list_ops": list_ops,
    "countdown": countdown,
    "small_arithmetic": small_arithmetic,
}
LEVELS = (1, 2, 3)
