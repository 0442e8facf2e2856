"""LiveCodeBench's date windows: a release tag (``v1``..``vN``, ``release_latest``, ``v2_v3``) or a date range
(``YYYY-MM-DD..YYYY-MM-DD``) -> :class:`Window`, and the problems whose contest date it keeps. A bad selection
raises :class:`~e2c.data.code_sets.CodeSetError` naming the valid ones (:data:`WINDOW_HELP`).
More: docs/data.md, "Code benchmarks".
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from e2c.data.code_sets import CodeSetError

LCB_START = dt.date(2023, 5, 1)
LCB_RELEASES: tuple[tuple[str, dt.date], ...] = (
    ("test.jsonl", dt.date(2024, 3, 31)),
    ("test2.jsonl", dt.date(2024, 5, 31)),
    ("test3.jsonl", dt.date(2024, 7, 31)),
    ("test4.jsonl", dt.date(2024, 9, 30)),
    ("test5.jsonl", dt.date(2025, 1, 31)),
    ("test6.jsonl", dt.date(2025, 4, 30)),
)
"""(hub file, last contest date) of each LiveCodeBench release, v1 first: release N's additions are in its file."""
LCB_FILES = tuple(f for f, _ in LCB_RELEASES)


@dataclass(frozen=True)
class Window:
    """A selection of problems by contest date: ``start``/``end`` inclusive (None: open), and the hub files
    that hold it (None: every file)."""

    text: str
    start: dt.date | None
    end: dt.date | None
    files: tuple[str, ...] | None = None

    def keeps(self, date: str) -> bool:
        """Whether a ``YYYY-MM-DD`` contest date is inside the window."""
        d = dt.date.fromisoformat(date)
        return (self.start is None or d >= self.start) and (self.end is None or d <= self.end)


_TAG = re.compile(r"(?:release_)?v(\d+)(?:_v(\d+))?\Z")
WINDOW_HELP = (
    "release_v1..release_v6, release_latest, vN (one release's additions), vA_vB, or a date window "
    "YYYY-MM-DD..YYYY-MM-DD (either side may be empty)"
)


def _day(text: str, what: str) -> dt.date | None:
    if not text:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise CodeSetError(f"{what} {text!r} is not a date YYYY-MM-DD") from None


def parse_window(text: str) -> Window:
    """A LiveCodeBench selector (:data:`WINDOW_HELP`) -> :class:`Window`; CodeSetError naming the valid ones.

    >>> w = parse_window("release_v2"); (w.start, w.end, w.files)
    (datetime.date(2023, 5, 1), datetime.date(2024, 5, 31), ('test.jsonl', 'test2.jsonl'))
    >>> parse_window("v5").start, parse_window("2024-08-01..").end
    (datetime.date(2024, 10, 1), None)
    """
    t = text.strip().lower()
    if t == "release_latest":
        return Window(t, None, None, None)
    m = _TAG.match(t)
    if m:
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if t.startswith("release_"):
            lo, hi = 1, int(m.group(1)) if not m.group(2) else hi
        n = len(LCB_RELEASES)
        if not 1 <= lo <= hi <= n:
            raise CodeSetError(f"LiveCodeBench release {text!r} is not one of v1..v{n}; valid: {WINDOW_HELP}")
        start = LCB_START if lo == 1 else LCB_RELEASES[lo - 2][1] + dt.timedelta(days=1)
        return Window(t, start, LCB_RELEASES[hi - 1][1], LCB_FILES[lo - 1 : hi])
    if ".." in t:
        a, b = t.split("..", 1)
        start, end = _day(a.strip(), "window start"), _day(b.strip(), "window end")
        if start and end and start > end:
            raise CodeSetError(f"window {text!r} starts after it ends")
        return Window(t, start, end, None)
    raise CodeSetError(f"unknown LiveCodeBench selection {text!r}; valid: {WINDOW_HELP}")


def in_window(problems: Iterable[Any], window: Window, date_of: Callable[[Any], str]) -> list[Any]:
    """The problems whose contest date (``date_of``) is in ``window``; CodeSetError for one without a date."""
    out = []
    for p in problems:
        d = date_of(p)
        if not d:
            raise CodeSetError(
                f"problem {getattr(p, 'id', '?')} has no contest_date; a window {window.text!r} needs one"
            )
        if window.keeps(d):
            out.append(p)
    return out
