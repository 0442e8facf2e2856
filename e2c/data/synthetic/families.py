"""Synthetic task families: a problem, its answer, a plan, and a reference program, at difficulty 1-3.

Each family is a function ``(rng, level) -> Task``. The answer is computed here *independently* of the
reference program (with the standard library: ``math.gcd``, ``pow``, ``math.comb``, direct formulas);
the program is later run under the tracer and its result must agree, or the sample is dropped.

The task's shape is in :mod:`e2c.data.synthetic.task`; the families are in
:mod:`e2c.data.synthetic.word_families` and :mod:`e2c.data.synthetic.math_families`.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from e2c.data.synthetic.math_families import counting, gcd_lcm, linear_equation, modular, sequence
from e2c.data.synthetic.task import Line, Step, Task
from e2c.data.synthetic.word_families import arithmetic, countdown, list_ops, small_arithmetic

__all__ = ["FAMILIES", "LEVELS", "Line", "Step", "Task"]

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
