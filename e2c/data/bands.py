"""Pass-rate bands: which prompts a filter keeps, by the share of k samples the start model got right.

The filter that samples and grades (:mod:`e2c.rl.passrate`) runs a model; this module is its arithmetic
only: the bands (names and intervals), pass rates, and the histogram of correct counts.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from e2c.commandline.argtypes import ValueType
from e2c.core.errors import UserError


@dataclass(frozen=True)
class Band:
    """An interval of pass rates: ``low < p < high``, with either end closed (``<=``) when its flag says so.

    >>> learnable = Band(0.0, 1.0)
    >>> [learnable.contains(p) for p in (0.0, 0.5, 1.0)]
    [False, True, False]
    >>> Band(0.0, 0.5, high_closed=True).describe()
    '0 < p <= 0.5'
    """

    low: float
    high: float
    low_closed: bool = False
    high_closed: bool = False
    name: str = ""  # the name it was given by (empty for a written interval)
    # keep a prompt when its samples' rewards differ (the interval then spans every pass rate): GRPO's
    # advantage is zero exactly when they do not, whatever the pass rate
    on_reward: bool = False

    def contains(self, p: float) -> bool:
        """Whether the pass rate ``p`` lies in the band."""
        above = p > self.low or (self.low_closed and p == self.low)
        below = p < self.high or (self.high_closed and p == self.high)
        return above and below

    def describe(self) -> str:
        """The band as inequalities on ``p`` (``0 < p < 1``; an end at 0 or 1 that bounds nothing is left out)."""
        parts = []
        if not (self.low == 0 and self.low_closed):
            parts.append(f"{_num(self.low)} {'<=' if self.low_closed else '<'} ")
        parts.append("p")
        if not (self.high == 1 and self.high_closed):
            parts.append(f" {'<=' if self.high_closed else '<'} {_num(self.high)}")
        text = "".join(parts)
        if self.on_reward:
            return "the reward varies across samples"
        return "every p" if text == "p" else text

    def spec(self) -> str:
        """The band in interval notation, as :func:`parse_band` reads it back.

        >>> Band(0.1, 0.9, low_closed=True).spec()
        '[0.1,0.9)'
        """
        return f"{'[' if self.low_closed else '('}{_num(self.low)},{_num(self.high)}{']' if self.high_closed else ')'}"

    def is_empty(self) -> bool:
        """No pass rate lies in it (``low > high``, or one point with an open end)."""
        return self.low > self.high or (self.low == self.high and not (self.low_closed and self.high_closed))


def _num(x: float) -> str:
    return f"{x:g}"


BANDS: dict[str, Band] = {
    # sometimes right, sometimes wrong: every GRPO group has a non-zero advantage (the default)
    "learnable": Band(0.0, 1.0, name="learnable"),
    # solved at most half the time, but not never
    "hard": Band(0.0, 0.5, high_closed=True, name="hard"),
    # solved at least half the time, but not always
    "easy": Band(0.5, 1.0, low_closed=True, name="easy"),
    # drop only what the start model always solves
    "not-solved": Band(0.0, 1.0, low_closed=True, name="not-solved"),
    # drop only what the start model never solves
    "solvable": Band(0.0, 1.0, high_closed=True, name="solvable"),
    # the RL reward differs across a prompt's samples (a group with an advantage; with the reward shape
    # "correct" the same prompts as learnable)
    "varies": Band(0.0, 1.0, low_closed=True, high_closed=True, name="varies", on_reward=True),
    # keep everything: only measure the pass rates
    "all": Band(0.0, 1.0, low_closed=True, high_closed=True, name="all"),
}
DEFAULT_BAND = "learnable"
_NUMBER = r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*"
_INTERVAL = re.compile(rf"^\s*([\[(]?){_NUMBER},{_NUMBER}([\])]?)\s*$")
BAND_SYNTAX = (
    "an interval of pass rates in [0, 1]: (LO,HI) open, [LO,HI] closed, (LO,HI] or [LO,HI) half-open, "
    "LO,HI open"
)


def band_choices() -> str:
    """The valid ``--band`` values, for help and error lines."""
    names = ", ".join(f"{n} ({b.describe()})" for n, b in BANDS.items())
    return f"{names}; or {BAND_SYNTAX}"


def read_band(spec: str) -> Band:
    """A band from its name (:data:`BANDS`) or interval notation; the UserError (no flag name: the caller's
    parser adds it) names the valid spellings.

    >>> read_band("learnable").describe(), read_band("(0,0.5]").describe(), read_band("0.2,0.8").describe()
    ('0 < p < 1', '0 < p <= 0.5', '0.2 < p < 0.8')
    >>> read_band("[0.25, 1]").contains(1.0)
    True
    """
    text = str(spec).strip()
    if text.lower() in BANDS:
        return BANDS[text.lower()]
    m = _INTERVAL.match(text)
    if m is None or bool(m.group(1)) != bool(m.group(4)):
        close = difflib.get_close_matches(text.lower(), list(BANDS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserError(f"{spec!r} is unknown{hint}; valid: {band_choices()}")
    low, high = float(m.group(2)), float(m.group(3))
    if not (0.0 <= low <= 1.0 and 0.0 <= high <= 1.0):
        raise UserError(f"{spec!r}: both ends must be pass rates in [0, 1], got {_num(low)} and {_num(high)}")
    band = Band(low, high, low_closed=m.group(1) == "[", high_closed=m.group(4) == "]")
    if band.is_empty():
        raise UserError(f"{spec!r} holds no pass rate; valid: {band_choices()}")
    return band


def parse_band(spec: str, what: str = "--band") -> Band:
    """:func:`read_band`, its error line naming ``what`` (the flag or key the spelling came from)."""
    try:
        return read_band(spec)
    except UserError as e:
        raise UserError(f"{what} {e}") from None


class BandSpec(ValueType):
    """A flag's or setting's band spelling (:func:`read_band`), kept as written."""

    name = "a pass-rate band"

    def parse(self, text: str) -> str:
        read_band(text)
        return str(text)


BAND = BandSpec()


# ------------------------------------------------------------------------------------ pure statistics
def pass_rate(correct: Sequence[float]) -> float:
    """Share of correct samples of one prompt (each sample 1/True correct, 0/False not).

    >>> pass_rate([1, 0, 0, 1])
    0.5
    """
    if not len(correct):
        raise ValueError("pass_rate of no samples")
    return sum(1 for c in correct if c) / len(correct)


def pass_rates(correct: Sequence[Sequence[float]]) -> list[float]:
    """:func:`pass_rate` of each prompt's samples.

    >>> pass_rates([[1, 1], [0, 1], [0, 0]])
    [1.0, 0.5, 0.0]
    """
    return [pass_rate(c) for c in correct]


def in_band(rates: Sequence[float], band: Band) -> list[bool]:
    """Per prompt, whether its pass rate lies in ``band``.

    >>> in_band([0.0, 0.25, 1.0], BANDS["learnable"])
    [False, True, False]
    """
    return [band.contains(p) for p in rates]


def reward_varies(rewards: Sequence[float]) -> bool:
    """Whether a prompt's samples got different rewards (GRPO's group advantage is then not zero).

    >>> reward_varies([0.1, 0.1, 0.1]), reward_varies([0.0, 0.1, 0.0])
    (False, True)
    """
    return len(rewards) > 1 and max(rewards) - min(rewards) > 1e-9


def kept_indices(
    rates: Sequence[float], band: Band, rewards: Sequence[Sequence[float]] | None = None
) -> list[int]:
    """Positions of the prompts whose pass rate lies in ``band`` (for a band ``on_reward``: whose
    ``rewards`` vary across samples), in input order.

    >>> kept_indices([0.0, 0.25, 1.0, 0.5], BANDS["learnable"])
    [1, 3]
    >>> kept_indices([0.0, 0.0], BANDS["varies"], [[0.1, 0.0], [0.1, 0.1]])
    [0]
    """
    if band.on_reward:
        if rewards is None:
            raise ValueError(f"band {band.name!r} needs each prompt's rewards")
        return [i for i, r in enumerate(rewards) if reward_varies(r)]
    return [i for i, keep in enumerate(in_band(rates, band)) if keep]


def histogram(n_correct: Sequence[int], k: int) -> list[int]:
    """Prompts per number of correct samples: entry ``j`` counts the prompts with ``j`` of ``k`` right
    (pass rate ``j / k``). With k samples these are the only pass rates there are, so the bins are exact.

    >>> histogram([0, 0, 2, 4], 4)
    [2, 0, 1, 0, 1]
    """
    counts = [0] * (k + 1)
    for j in n_correct:
        if not 0 <= j <= k:
            raise ValueError(f"{j} correct out of {k} samples")
        counts[j] += 1
    return counts


def format_histogram(counts: Sequence[int]) -> str:
    """The non-empty bins of a :func:`histogram` as ``correct/k: prompts``.

    >>> format_histogram([97, 0, 0, 3])
    '0/3: 97, 3/3: 3'
    """
    k = len(counts) - 1
    return ", ".join(f"{j}/{k}: {c}" for j, c in enumerate(counts) if c) or "no prompts"


# ------------------------------------------------------------------------------------------- settings
