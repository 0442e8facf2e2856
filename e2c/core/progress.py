"""Progress bars for long work (tqdm, on stderr), drawn only where someone watches: on a terminal.

Piped into a file or a CI log a bar would be a line per refresh, so there the work reports as it always
did, in plain log lines, and the bar stays off. ``E2C_PROGRESS=1`` draws bars anyway, ``E2C_PROGRESS=0``
never. Callers keep their log lines for the quiet case: ``if bar.disable: log(...)``.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from e2c.core.env import env_switch

ENV = "E2C_PROGRESS"

# A command of several evaluations (``e2c.eval.run --then``) says where each starts, so a reader of its lines
# (the quickstart's progress) knows which evaluation the problem lines that follow belong to.
EVALUATION_RE = re.compile(r"^evaluation (\d+)/(\d+):(?:\s|$)")


def evaluation_line(n: int, total: int, folder: object) -> str:
    """The line that starts evaluation ``n`` of ``total`` (1-based), writing into ``folder``.

    >>> EVALUATION_RE.match(evaluation_line(2, 3, "out/avg8")).groups()
    ('2', '3')
    """
    return f"evaluation {n}/{total}: {folder}"


def enabled(stream: Any = None) -> bool:
    """Whether bars are drawn: ``E2C_PROGRESS`` if set (1/0), else whether stderr is a terminal."""
    switch = env_switch(ENV)
    if switch is not None:
        return switch
    stream = stream if stream is not None else sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


def bar(total: float | None, desc: str, unit: str = "it", initial: float = 0, **kwargs: Any) -> Any:
    """A tqdm bar with an ETA (``unit="B"`` scales to kB/MB); ``bar.disable`` tells callers to log instead."""
    from tqdm.auto import tqdm

    if unit == "B":
        kwargs.setdefault("unit_scale", True)
        kwargs.setdefault("unit_divisor", 1024)
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        initial=initial,
        disable=not enabled(),
        dynamic_ncols=True,
        leave=True,
        file=sys.stderr,
        **kwargs,
    )
