"""Synthetic task families of school mathematics: linear equations, modular powers, gcd and lcm, counting and
sequences (see :mod:`e2c.data.synthetic.families`)."""

from __future__ import annotations

import math
import random

from e2c.data.synthetic.task import Line, Step, Task


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
            Step(
                "Collect the x terms on the left",
                f"subtract {c}x from both sides" if c else "the x terms are already on the left",
                [
                    Line(f"a, b, c, d = {a}, {b}, {c}, {d}"),
                    Line("coef = a - c", "The coefficient of x is a - c = {coef}."),
                ],
            ),
            Step(
                "Collect the constants on the right",
                f"move {b} to the right side",
                [Line("const = d - b", "The constant side is d - b = {const}.")],
            ),
            Step(
                "Divide by the coefficient",
                "x is the constant divided by the coefficient",
                [
                    Line("x = const // coef", "So x = {const} / {coef} = {x}."),
                    Line("check = a * x + b == c * x + d", "Substituting back, both sides agree: {check}."),
                ],
            ),
        ]
        problem = f"Solve for x: {lhs} = {rhs}."
        return Task(
            "linear_equation",
            level,
            problem,
            str(x),
            x,
            steps,
            "x",
            [
                "guess values of x until both sides match",
                "isolate x by balancing both sides",
                "graph both sides and find the crossing",
            ],
            1,
            "it is exact and needs only a few operations",
        )
    y = rng.randint(-9, 12)
    while True:
        a1, b1, a2, b2 = (rng.randint(-7, 7) for _ in range(4))
        if a1 and b1 and a2 and b2 and a1 * b2 - a2 * b1 != 0:
            break
    c1, c2 = a1 * x + b1 * y, a2 * x + b2 * y
    e1 = f"{a1}x + {b1}y = {c1}".replace("+ -", "- ")
    e2 = f"{a2}x + {b2}y = {c2}".replace("+ -", "- ")
    steps = [
        Step(
            "Compute the determinant",
            "the system has one solution when a1*b2 - a2*b1 is not zero",
            [
                Line(f"a1, b1, c1 = {a1}, {b1}, {c1}"),
                Line(f"a2, b2, c2 = {a2}, {b2}, {c2}"),
                Line("det = a1 * b2 - a2 * b1"),
            ],
        ),
        Step(
            "Solve for x with Cramer's rule",
            "x = (c1*b2 - c2*b1) / det",
            [Line("x = (c1 * b2 - c2 * b1) // det")],
        ),
        Step(
            "Solve for y and check",
            "y = (a1*c2 - a2*c1) / det, then substitute back",
            [
                Line("y = (a1 * c2 - a2 * c1) // det"),
                Line("ok = a1 * x + b1 * y == c1 and a2 * x + b2 * y == c2"),
            ],
        ),
    ]
    problem = f"Solve the system {e1} and {e2}. What is x?"
    return Task(
        "linear_equation",
        level,
        problem,
        str(x),
        x,
        steps,
        "x",
        ["substitute one equation into the other", "eliminate with Cramer's rule", "try integer pairs"],
        1,
        "it gives x directly from the coefficients",
    )


def modular(rng: random.Random, level: int) -> Task:
    m = rng.randint(7, 20 + 30 * level)
    a = rng.randint(2, 3 * m)
    e = rng.randint(2 ** (1 + 2 * level), 2 ** (3 + 2 * level))
    steps = [
        Step(
            "Set up the result and the reduced base",
            f"start with result 1 and base {a} mod {m}",
            [
                Line(f"m = {m}"),
                Line(f"base = {a} % m", "Reduce the base:"),
                Line(f"exp = {e}"),
                Line("result = 1"),
            ],
        ),
        Step(
            "Square and multiply over the bits of the exponent",
            "when the lowest bit is 1 multiply the result by the base; square the base; halve the exponent",
            [
                Line("while exp > 0:"),
                Line("    if exp % 2 == 1:"),
                Line("        result = result * base % m", "The bit is 1, so multiply:"),
                Line("    base = base * base % m", "Square the base:"),
                Line("    exp = exp // 2", "Halve the exponent:"),
            ],
        ),
    ]
    ans = pow(a, e, m)
    return Task(
        "modular",
        level,
        f"What is the remainder when {a}^{e} is divided by {m}?",
        str(ans),
        ans,
        steps,
        "result",
        [
            "compute the full power and divide",
            "square and multiply modulo m",
            "look for a cycle in the powers",
        ],
        1,
        "the numbers stay below m at every step",
    )


def gcd_lcm(rng: random.Random, level: int) -> Task:
    g = rng.randint(2, 6 + 4 * level)
    a, b = g * rng.randint(2, 9 * level), g * rng.randint(2, 9 * level)
    euclid = [Line("while b != 0:"), Line("    a, b = b, a % b", "Replace (a, b) by (b, a mod b):")]
    if level == 1:
        steps = [
            Step("Set up the two numbers", f"a = {a}, b = {b}", [Line(f"a, b = {a}, {b}")]),
            Step("Apply the Euclidean algorithm", "replace (a, b) by (b, a mod b) until b is 0", euclid),
        ]
        return Task(
            "gcd_lcm",
            level,
            f"What is the greatest common divisor of {a} and {b}?",
            str(math.gcd(a, b)),
            math.gcd(a, b),
            steps,
            "a",
            ["list all divisors of both numbers", "use the Euclidean algorithm", "factor both into primes"],
            1,
            "it needs only a few divisions",
        )
    if level == 2:
        lcm = a * b // math.gcd(a, b)
        steps = [
            Step(
                "Set up the two numbers",
                f"keep a copy of the product {a} * {b}",
                [Line(f"a, b = {a}, {b}"), Line("product = a * b")],
            ),
            Step(
                "Find the gcd with the Euclidean algorithm",
                "replace (a, b) by (b, a mod b) until b is 0",
                euclid,
            ),
            Step(
                "Divide the product by the gcd",
                "lcm = a*b / gcd",
                [Line("lcm = product // a", "The lcm is {product} / {a} = {lcm}.")],
            ),
        ]
        return Task(
            "gcd_lcm",
            level,
            f"What is the least common multiple of {a} and {b}?",
            str(lcm),
            lcm,
            steps,
            "lcm",
            ["list multiples until they meet", "use lcm = a*b / gcd(a, b)", "factor both into primes"],
            1,
            "the gcd is quick to find and the formula is exact",
        )
    c = g * rng.randint(2, 9 * level)
    ans = math.gcd(math.gcd(a, b), c)
    steps = [
        Step(
            "Find the gcd of the first two numbers",
            f"Euclid on {a} and {b}",
            [Line(f"a, b = {a}, {b}"), *euclid],
        ),
        Step(
            "Take the gcd with the third number",
            f"Euclid on that gcd and {c}",
            [Line(f"b = {c}", "Bring in the third number: b = {b}."), *euclid],
        ),
    ]
    return Task(
        "gcd_lcm",
        level,
        f"What is the greatest common divisor of {a}, {b} and {c}?",
        str(ans),
        ans,
        steps,
        "a",
        ["list all common divisors", "apply the Euclidean algorithm twice", "factor into primes"],
        1,
        "gcd(a, b, c) = gcd(gcd(a, b), c)",
    )


def counting(rng: random.Random, level: int) -> Task:
    if level == 1:
        n = rng.randint(30, 300)
        p, q = rng.sample([2, 3, 4, 5, 6, 7, 9, 10, 11], 2)
        lcm = p * q // math.gcd(p, q)
        ans = n // p + n // q - n // lcm
        steps = [
            Step(
                "Count the multiples of each number",
                f"floor({n}/{p}) and floor({n}/{q})",
                [Line(f"n, p, q = {n}, {p}, {q}"), Line("count_p = n // p"), Line("count_q = n // q")],
            ),
            Step(
                "Count the multiples of both",
                "multiples of the lcm were counted twice",
                [
                    Line("a, b = p, q"),
                    Line("while b != 0:"),
                    Line("    a, b = b, a % b"),
                    Line("lcm = p * q // a", "The lcm of {p} and {q} is {lcm}."),
                    Line("count_both = n // lcm"),
                ],
            ),
            Step(
                "Apply inclusion-exclusion",
                "add the two counts and subtract the overlap",
                [
                    Line(
                        "total = count_p + count_q - count_both",
                        "{count_p} + {count_q} - {count_both} = {total}.",
                    )
                ],
            ),
        ]
        return Task(
            "counting",
            level,
            f"How many integers from 1 to {n} are divisible by {p} or {q}?",
            str(ans),
            ans,
            steps,
            "total",
            ["check every number one by one", "use inclusion-exclusion", "count the complement"],
            1,
            "it needs three divisions instead of a scan",
        )
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
    steps = [
        Step(
            "Reduce to a binomial coefficient", f"the answer is C({top}, {kk})", [Line(f"n, k = {top}, {kk}")]
        ),
        Step(
            "Build the coefficient one factor at a time",
            "multiply by (n - k + i) and divide by i for i = 1..k",
            [
                Line("c = 1"),
                Line("for i in range(1, k + 1):"),
                Line("    c = c * (n - k + i) // i", "For i = {i}:"),
            ],
        ),
    ]
    return Task(
        "counting",
        level,
        problem,
        str(ans),
        ans,
        steps,
        "c",
        ["list every arrangement", "use a binomial coefficient", "build a recursion table"],
        1,
        "the count is a standard binomial coefficient",
    )


def sequence(rng: random.Random, level: int) -> Task:
    if level == 1:
        a1, d, n = rng.randint(-5, 20), rng.randint(-4, 9), rng.randint(4, 9)
        ans = n * (2 * a1 + (n - 1) * d) // 2
        steps = [
            Step(
                "Start with the first term",
                f"term = {a1}, total = 0",
                [Line(f"term, d, n = {a1}, {d}, {n}"), Line("total = 0")],
            ),
            Step(
                "Add the terms one by one",
                "add the term to the total, then step by the difference",
                [
                    Line("for i in range(n):"),
                    Line("    total = total + term", "Add the term:"),
                    Line("    term = term + d"),
                ],
            ),
        ]
        return Task(
            "sequence",
            level,
            f"An arithmetic sequence starts at {a1} with common difference {d}. "
            f"What is the sum of its first {n} terms?",
            str(ans),
            ans,
            steps,
            "total",
            ["use the closed-form sum formula", "add the terms one by one", "pair first and last terms"],
            1,
            "it is easy to check each term",
        )
    if level == 2:
        a0, r, s, k = rng.randint(1, 6), rng.randint(2, 3), rng.randint(-3, 5), rng.randint(4, 7)
        ans = a0
        for _ in range(k):
            ans = r * ans + s
        steps = [
            Step("Set the first term", f"a_0 = {a0}", [Line(f"a, r, s = {a0}, {r}, {s}")]),
            Step(
                "Apply the recurrence",
                f"apply a -> {r}a + {s} {k} times",
                [Line(f"for n in range(1, {k + 1}):"), Line("    a = r * a + s", "a_{n}:")],
            ),
        ]
        return Task(
            "sequence",
            level,
            f"A sequence has a_0 = {a0} and a_(n+1) = {r}a_n + {s}. What is a_{k}?".replace("+ -", "- "),
            str(ans),
            ans,
            steps,
            "a",
            ["find a closed form", "iterate the recurrence", "guess a pattern"],
            1,
            "only a few terms are needed",
        )
    f0, f1, k, m = rng.randint(0, 5), rng.randint(1, 7), rng.randint(6, 12), rng.randint(7, 31)
    x, y = f0, f1
    for _ in range(k - 1):
        x, y = y, (x + y) % m
    steps = [
        Step("Set the two seed terms", f"f_0 = {f0}, f_1 = {f1}", [Line(f"prev, cur, m = {f0}, {f1}, {m}")]),
        Step(
            "Roll the pair forward modulo m",
            "replace (prev, cur) by (cur, (prev + cur) mod m)",
            [Line(f"for n in range(2, {k + 1}):"), Line("    prev, cur = cur, (prev + cur) % m", "f_{n}:")],
        ),
    ]
    return Task(
        "sequence",
        level,
        f"Let f_0 = {f0}, f_1 = {f1} and f_n = (f_(n-1) + f_(n-2)) mod {m}. What is f_{k}?",
        str(y),
        y,
        steps,
        "cur",
        ["find the period of the sequence", "compute the terms in order", "use matrix powers"],
        1,
        "k is small, so direct computation is fastest",
    )
