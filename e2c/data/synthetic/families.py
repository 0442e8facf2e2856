"""Synthetic task families: a problem, its answer, a plan, and a reference program, at difficulty 1-3.

Each family is a function ``(rng, level) -> Task`` (:mod:`e2c.data.synthetic.task`), defined in
:mod:`~e2c.data.synthetic.word_families`, :mod:`~e2c.data.synthetic.math_families` and
:mod:`~e2c.data.synthetic.code_families`. The answer is computed independently of the reference program; the
program's traced result must agree, or the sample is dropped. :data:`FAMILIES` are the default selection;
:data:`OPT_IN_FAMILIES` are drawn only when named. Task ``i`` is family ``i mod F``, so a family added to
:data:`FAMILIES` would change every default run's output: new families join the opt-in ones.
More: docs/data.md, "Synthetic tasks".
"""

from __future__ import annotations

import random
from collections.abc import Callable

from e2c.data.synthetic.code_families import code
from e2c.data.synthetic.math_families import counting, gcd_lcm, linear_equation, modular, sequence
from e2c.data.synthetic.task import Line, Step, Task
from e2c.data.synthetic.word_families import arithmetic, countdown, list_ops, small_arithmetic

__all__ = ["FAMILIES", "LEVELS", "OPT_IN_FAMILIES", "Line", "Step", "Task", "family_names", "get_family"]

Family = Callable[[random.Random, int], Task]

FAMILIES: dict[str, Family] = {
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
OPT_IN_FAMILIES: dict[str, Family] = {
    "code": code,
}
LEVELS = (1, 2, 3)


def family_names() -> tuple[str, ...]:
    """Every valid family name: the default ones in order, then the opt-in ones."""
    return (*FAMILIES, *OPT_IN_FAMILIES)


def get_family(name: str) -> Family:
    """The family called ``name`` (read when called, so a test may replace an entry); KeyError if none."""
    return FAMILIES[name] if name in FAMILIES else OPT_IN_FAMILIES[name]
