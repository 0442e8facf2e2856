"""Countdown answers: an arithmetic expression that must use the given numbers and hit the target.

The expression is parsed with :mod:`ast` and evaluated by walking the tree over exact fractions; only
numbers, ``+ - * /``, unary minus and parentheses are accepted. Nothing is ever passed to ``eval``.
The reference is ``{"target": T, "numbers": [...]}`` (a dict or its JSON string).
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from fractions import Fraction
from typing import Any

_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b}
MAX_LEN = 200


def parse_reference(gold: Any) -> tuple[int, list[int]] | None:
    """``(target, numbers)`` from a dict or its JSON string; None if malformed."""
    if isinstance(gold, str):
        try:
            gold = json.loads(gold)
        except (ValueError, RecursionError):  # also a huge integer literal or a deeply nested text
            return None
    if not isinstance(gold, dict):
        return None
    t, nums = gold.get("target"), gold.get("numbers")
    if not isinstance(t, int) or not isinstance(nums, list) or not all(isinstance(n, int) for n in nums):
        return None
    return t, nums


def evaluate(expr: str) -> tuple[Fraction, list[int]] | None:
    """Exact value and the integer literals used, or None when the text is not a plain arithmetic
    expression (names, calls, powers, division by zero, non-integer literals, too long)."""
    text = expr.strip().replace("\\times", "*").replace("\\cdot", "*").replace("×", "*").replace("÷", "/")
    text = text.split("=", 1)[0]  # "expr = 24": the claimed value is not part of the expression
    text = text.replace("\\left", "").replace("\\right", "").replace("{", "(").replace("}", ")")
    if not text or len(text) > MAX_LEN:
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        return None
    used: list[int] = []

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            used.append(node.value)
            return Fraction(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Div):
                if b == 0:
                    raise ZeroDivisionError
                return a / b
            op = _OPS.get(type(node.op))
            if op is not None:
                return op(a, b)
        raise ValueError(type(node).__name__)

    try:
        return walk(tree.body), used
    except (ValueError, ZeroDivisionError, RecursionError):
        return None


def check(expr: str | None, gold: Any) -> tuple[bool, str]:
    """``(correct, how)``: how is ``ok``, ``unparseable_gold``, ``not_arithmetic``, ``wrong_numbers``
    (each given number exactly once) or ``wrong_value``."""
    ref = parse_reference(gold)
    if ref is None:
        return False, "unparseable_gold"
    if expr is None:
        return False, "not_arithmetic"
    got = evaluate(expr)
    if got is None:
        return False, "not_arithmetic"
    value, used = got
    target, numbers = ref
    if Counter(used) != Counter(numbers):
        return False, "wrong_numbers"
    return (value == target, "ok" if value == target else "wrong_value")
