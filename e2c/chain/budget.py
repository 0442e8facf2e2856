"""The one rule that splits a chain's token budget into its two phases.

Eval's two-phase chains, test-time scaling and the RL agent loop share three numbers: ``max_tokens`` (the
whole chain), ``explore`` (the exploration's limit; ``None`` is off, one call for the whole chain, and the
only "off" value: :func:`from_config` turns RL's Hydra ``0`` into it) and ``execute`` (the execution's
limit; ``None``: what the exploration leaves of ``max_tokens``). :class:`PhaseBudget` checks the three once,
with the caller's own names for them, and answers the two phase limits.
More: docs/extending.md, "Budgets".
"""

from __future__ import annotations

from dataclasses import dataclass

from e2c.core.errors import UserError

__all__ = [
    "FLAG_NAMES",
    "PARAM_NAMES",
    "RL_NAMES",
    "TTS_NAMES",
    "BudgetError",
    "BudgetNames",
    "PhaseBudget",
    "from_config",
]


class BudgetError(UserError, ValueError):
    """Budgets that make no chain; one line naming the setting. A :class:`UserError` for entry points, a
    ``ValueError`` for library callers."""


@dataclass(frozen=True)
class BudgetNames:
    """How a caller spells the three settings in its error lines."""

    explore: str
    execute: str
    max_tokens: str


# The one table of how each caller spells the three numbers.
FLAG_NAMES = BudgetNames("--explore-budget", "--execute-budget", "--max-tokens")  # eval's command line
PARAM_NAMES = BudgetNames("explore_budget", "execute_budget", "max_tokens")  # the library's keywords
TTS_NAMES = BudgetNames(
    "explore_budget (--set)", "execute_budget (--set)", "cot_tokens (--set)"
)  # TTS settings
# RL's rollout settings (the response length caps the whole chain)
RL_NAMES = BudgetNames("e2c.rollout.explore_budget", "e2c.rollout.execute_budget", "data.max_response_length")


def from_config(value: int | None) -> int | None:
    """A budget as RL's config writes it (``0``: off) in this module's convention (``None``: off).

    >>> from_config(0), from_config(512), from_config(None)
    (None, 512, None)
    """
    return value or None


@dataclass(frozen=True)
class PhaseBudget:
    """A chain's token budget; constructing one checks it (raises :class:`BudgetError`).

    >>> b = PhaseBudget(100, explore=30)
    >>> b.two_phase, b.explore_limit, b.execute_limit(), b.total
    (True, 30, 70, 100)
    >>> b.execute_limit(explored=12)
    88
    >>> PhaseBudget(100, explore=30, execute=50).execute_limit(explored=12)
    50
    >>> PhaseBudget(100, explore=30, execute=50, capped=True).execute_limit(explored=60)
    40
    >>> PhaseBudget(20, explore=512, capped=True).explore_limit
    20
    >>> PhaseBudget(100).total
    100
    >>> try:
    ...     PhaseBudget(20, explore=20)
    ... except BudgetError as e:
    ...     print(e)
    explore_budget 20 leaves nothing of max_tokens 20 for the execution; lower it or give execute_budget
    """

    max_tokens: int
    explore: int | None = None
    execute: int | None = None
    names: BudgetNames = PARAM_NAMES
    max_label: str | None = None  # how an error line names max_tokens (default: "<its name> <value>")
    # max_tokens bounds the whole chain, whatever the phase budgets say (the RL rollout's response length,
    # which a row may lower): the phases are cut to what is left instead of refused.
    capped: bool = False

    def __post_init__(self) -> None:
        n = self.names
        if self.execute is not None and self.explore is None:
            raise BudgetError(f"{n.execute} needs {n.explore} (two-phase generation)")
        for name, value in (
            (n.explore, self.explore),
            (n.execute, self.execute),
            (n.max_tokens, self.max_tokens),
        ):
            if value is not None and value < 1:
                raise BudgetError(f"{name} must be >= 1, got {value}")
        leaves_nothing = (
            self.explore is not None and self.execute is None and self.max_tokens - self.explore < 1
        )
        if leaves_nothing and not self.capped:
            label = self.max_label or f"{n.max_tokens} {self.max_tokens}"
            raise BudgetError(
                f"{n.explore} {self.explore} leaves nothing of {label} for the execution; lower it or give {n.execute}"
            )

    @property
    def two_phase(self) -> bool:
        """Whether the chain is generated as an exploration, then an execution."""
        return self.explore is not None

    @property
    def explore_limit(self) -> int:
        """The exploration's token limit (a one-phase chain has none: its whole budget)."""
        if self.explore is None:
            return self.max_tokens
        return min(self.explore, self.max_tokens) if self.capped else self.explore

    def execute_limit(self, explored: int | None = None) -> int:
        """The execution's token limit: ``execute``, or what the exploration leaves of ``max_tokens``.

        ``explored``: the tokens the exploration actually took (default: its whole budget, the static split
        a batched two-phase call uses). A capped budget never gives the execution more than is left of
        ``max_tokens``; its limit may then be 0.
        """
        if self.explore is None:
            return self.max_tokens
        left = self.max_tokens - (self.explore_limit if explored is None else explored)
        if self.capped:
            left = max(0, left)
            return left if self.execute is None else min(self.execute, left)
        return left if self.execute is None else self.execute

    @property
    def total(self) -> int:
        """The most new tokens one chain may take, both phases together (what must fit the context)."""
        return self.explore_limit + self.execute_limit() if self.explore is not None else self.max_tokens
