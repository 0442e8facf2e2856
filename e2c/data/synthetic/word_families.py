"""Synthetic task families told as small stories and list puzzles: equal groups, stock arithmetic, list
operations and countdown (see :mod:`e2c.data.synthetic.families`)."""

from __future__ import annotations

import json
import random

from e2c.data.synthetic.task import Line, Step, Task


def _pick(rng: random.Random, options: list[str]) -> str:
    return options[rng.randrange(len(options))]


def arithmetic(rng: random.Random, level: int) -> Task:
    crates, per = rng.randint(3, 9 * level), rng.randint(4, 12 + 4 * level)
    shipped = rng.randint(1, crates * per - 1)
    more = rng.randint(2, 5 + level)
    thing, place = (
        _pick(rng, ["books", "apples", "bolts", "cans", "pens"]),
        _pick(rng, ["shop", "warehouse", "depot"]),
    )
    steps = [
        Step(
            "Count the starting items",
            f"multiply the {crates} boxes by {per} {thing} per box",
            [Line("items = crates * per_box", "{crates} boxes with {per_box} each give items = {items}.")],
        ),
        Step(
            "Remove the shipped items",
            f"subtract the {shipped} {thing} shipped",
            [Line("items = items - shipped", "After shipping {shipped}, items = {items}.")],
        ),
    ]
    text = f"A {place} has {crates} boxes with {per} {thing} in each box. It ships out {shipped} {thing}."
    total = crates * per - shipped
    pre = [Line(f"crates = {crates}"), Line(f"per_box = {per}"), Line(f"shipped = {shipped}")]
    if level >= 2:
        steps.append(
            Step(
                "Add the new boxes",
                f"add {more} new boxes of {per}",
                [Line(f"new_items = {more} * per_box"), Line("items = items + new_items")],
            )
        )
        text += f" Then {more} more boxes of {per} {thing} arrive."
        total += more * per
    result = "items"
    if level >= 3:
        divisors = [d for d in range(2, 10) if total % d == 0]
        if divisors:
            stores = rng.choice(divisors)
            steps.append(
                Step(
                    "Share the items equally among the stores",
                    f"divide the total by {stores}",
                    [Line(f"stores = {stores}"), Line("each = items // stores")],
                )
            )
            text += f" The {thing} are then shared equally among {stores} stores. How many {thing} does each store get?"
            total //= stores
            result = "each"
    if result == "items":
        text += f" How many {thing} does the {place} have now?"
    steps[0].lines = pre + steps[0].lines
    return Task(
        "arithmetic",
        level,
        text,
        str(total),
        total,
        steps,
        result,
        [
            "add up every box one at a time",
            "track the running total after each event",
            "write one expression for everything and simplify it",
        ],
        1,
        "it keeps each intermediate number small and easy to check",
    )


def small_arithmetic(rng: random.Random, level: int) -> Task:
    """Equal groups, sized for ~100M-parameter models: every step is a one-digit product (2-9 times 2-9), then
    a sum with a one-digit number (level 2) or with a second product (level 3)."""
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    name, thing = (
        _pick(rng, ["Mia", "Sam", "Ana", "Leo", "Kim"]),
        _pick(rng, ["marbles", "stickers", "cookies", "shells"]),
    )
    holder = _pick(rng, ["bags", "boxes", "jars"])
    text = f"{name} has {a} {holder} with {b} {thing} in each."
    steps = [
        Step(
            "Count the items in the groups",
            f"multiply {a} {holder} by {b} {thing} each",
            [Line(f"groups, each = {a}, {b}"), Line("total = groups * each")],
        )
    ]
    total = a * b
    if level == 2:
        c = rng.randint(1, 9)
        text += f" {name} also has {c} loose {thing}."
        steps.append(
            Step(
                "Add the loose items",
                f"add the {c} loose {thing}",
                [Line(f"loose = {c}"), Line("total = total + loose")],
            )
        )
        total += c
    elif level >= 3:
        c, d = rng.randint(2, 9), rng.randint(2, 9)
        text += f" {name} also has {c} more {holder} with {d} {thing} in each."
        steps.append(
            Step(
                "Count the second groups and add them",
                f"multiply {c} by {d}, then add",
                [Line(f"more = {c} * {d}"), Line("total = total + more")],
            )
        )
        total += c * d
    text += f" How many {thing} does {name} have in all?"
    return Task(
        "small_arithmetic",
        level,
        text,
        str(total),
        total,
        steps,
        "total",
        [
            "count the items one by one",
            "multiply the groups by the size of each group",
            "add the groups one at a time",
        ],
        1,
        "equal groups are counted fastest by multiplying",
    )


def list_ops(rng: random.Random, level: int) -> Task:
    xs = [rng.randint(1, 60) for _ in range(4 + 2 * level)]
    shown = ", ".join(map(str, xs))
    if level == 1:
        ans = sum(x for x in xs if x % 2 == 0)
        steps = [
            Step("Start with an empty sum", "total = 0", [Line(f"xs = [{shown}]"), Line("total = 0")]),
            Step(
                "Add each even number",
                "go through the list and add the numbers divisible by 2",
                [
                    Line("for x in xs:"),
                    Line("    if x % 2 == 0:"),
                    Line("        total = total + x", "{x} is even:"),
                ],
            ),
        ]
        return Task(
            "list_ops",
            level,
            f"What is the sum of the even numbers in the list [{shown}]?",
            str(ans),
            ans,
            steps,
            "total",
            ["sort first, then add", "scan once and add the even numbers", "count then multiply"],
            1,
            "one pass over the list is enough",
        )
    if level == 2:
        ans = sum(sorted(xs)[-3:])
        steps = [
            Step(
                "Sort the list",
                "sort in increasing order",
                [Line(f"xs = [{shown}]"), Line("ordered = sorted(xs)")],
            ),
            Step("Take the three largest", "the last three of the sorted list", [Line("top = ordered[-3:]")]),
            Step(
                "Add them",
                "sum the three",
                [Line("total = sum(top)", "{top[0]} + {top[1]} + {top[2]} = {total}.")],
            ),
        ]
        return Task(
            "list_ops",
            level,
            f"What is the sum of the three largest numbers in [{shown}]?",
            str(ans),
            ans,
            steps,
            "total",
            ["scan three times for the maximum", "sort and take the last three", "use a running top-three"],
            1,
            "sorting makes the choice obvious",
        )
    t = sorted(set(xs))[len(set(xs)) // 3]
    kept = sorted(x for x in set(xs) if x > t)
    if len(kept) < 2:
        return list_ops(rng, 2)
    ans = kept[0] * kept[1]
    steps = [
        Step(
            "Remove duplicates and sort",
            "sort the distinct values",
            [Line(f"xs = [{shown}]"), Line("uniq = sorted(set(xs))")],
        ),
        Step(
            f"Keep the values greater than {t}",
            "filter the sorted list",
            [Line(f"kept = [x for x in uniq if x > {t}]")],
        ),
        Step(
            "Multiply the two smallest kept values",
            "the first two of the filtered list",
            [Line("product = kept[0] * kept[1]", "{kept[0]} * {kept[1]} = {product}.")],
        ),
    ]
    return Task(
        "list_ops",
        level,
        f"From the list [{shown}], remove duplicates and keep only the numbers greater "
        f"than {t}. What is the product of the two smallest numbers left?",
        str(ans),
        ans,
        steps,
        "product",
        ["scan repeatedly for minima", "sort the distinct values, then filter", "use a heap"],
        1,
        "after sorting the two smallest are the first two",
    )


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
    steps = [
        Step(
            f"Combine the numbers in the order {', '.join(str(nums[i]) for i in order)}",
            "apply each operation to the running value",
            lines,
        ),
        Step(
            "Confirm the target is reached",
            f"the last value must be {target}",
            [
                Line(f"reached = t{count - 1} == {target}", "The value equals the target: {reached}."),
                Line(f"value = t{count - 1}"),
            ],
        ),
    ]
    problem = (
        f"Using each of the numbers {', '.join(map(str, nums))} exactly once, with +, -, * and / "
        f"(and parentheses), make {target}. Give the expression."
    )
    gold = json.dumps({"target": target, "numbers": nums})
    return Task(
        "countdown",
        level,
        problem,
        expr,
        target,
        steps,
        "value",
        [
            "try every order and operation",
            "build up from the numbers toward the target",
            "work backwards from the target",
        ],
        1,
        "a short chain of operations reaches it",
        kind="countdown",
        gold=gold,
        numbers=nums,
    )
