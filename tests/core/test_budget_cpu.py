"""The one phase-budget rule (e2c.chain.budget) against the plain rules each caller used to write for itself."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from e2c.chain.budget import FLAG_NAMES, BudgetError, PhaseBudget, from_config
from e2c.core.errors import UserError

sizes = st.integers(min_value=1, max_value=10_000)
maybe = st.none() | sizes


def eval_rule(max_tokens: int, explore: int | None, execute: int | None) -> tuple[int, int] | None:
    """Eval's static split: (explore limit, execute limit), or None when it makes no chain."""
    if explore is None:
        return None if execute is not None else (max_tokens, max_tokens)
    execute = execute if execute is not None else max_tokens - explore
    return None if execute < 1 else (explore, execute)


def rl_rule(cap: int, explore: int, execute: int, explored: int) -> tuple[int, int]:
    """The RL agent loop's elastic budgets (config values, 0 = off) at one row's response cap."""
    left = cap - explored
    return min(explore, cap), min(execute or left, left)


@given(sizes, maybe, maybe)
def test_static_split_matches_the_plain_rule_cpu(
    max_tokens: int, explore: int | None, execute: int | None
) -> None:
    want = eval_rule(max_tokens, explore, execute)
    if want is None:
        with pytest.raises(BudgetError):
            PhaseBudget(max_tokens, explore, execute)
        return
    b = PhaseBudget(max_tokens, explore, execute)
    assert (b.explore_limit, b.execute_limit()) == want
    assert b.total == (want[0] + want[1] if explore is not None else max_tokens)


@given(sizes, st.integers(0, 20_000), st.integers(0, 20_000), st.integers(0, 20_000))
def test_capped_split_matches_the_agent_loop_rule_cpu(
    cap: int, explore: int, execute: int, explored: int
) -> None:
    if execute and not explore:  # refused where RL reads its config (e2c.rl.settings), before any rollout
        with pytest.raises(BudgetError, match="needs"):
            PhaseBudget(cap, from_config(explore), from_config(execute), capped=True)
        return
    b = PhaseBudget(cap, from_config(explore), from_config(execute), capped=True)
    assert b.two_phase == bool(explore)
    if not explore:
        assert b.execute_limit() == cap
        return
    explored = min(explored, b.explore_limit + 2)  # the exploration plus a forced boundary and bridge
    want_explore, want_execute = rl_rule(cap, explore, execute, explored)
    assert b.explore_limit == want_explore
    # the loop generates an execution only when its limit is positive: equal there, and both "none" otherwise
    got = b.execute_limit(explored=explored)
    assert got == want_execute if want_execute > 0 else got == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((100, None, 5), "--execute-budget needs --explore-budget (two-phase generation)"),
        ((100, 0, None), "--explore-budget must be >= 1, got 0"),
        ((100, 5, -1), "--execute-budget must be >= 1, got -1"),
        ((0, None, None), "--max-tokens must be >= 1, got 0"),
        ((20, 20, None), "--explore-budget 20 leaves nothing of --max-tokens 20 for the execution"),
    ],
)
def test_errors_name_the_callers_flags_cpu(args: tuple, message: str) -> None:
    with pytest.raises(BudgetError) as e:
        PhaseBudget(*args, names=FLAG_NAMES)
    assert str(e.value).startswith(message)
    assert isinstance(e.value, UserError) and isinstance(e.value, ValueError)


def test_a_given_execution_budget_is_kept_uncapped_and_cut_when_capped_cpu() -> None:
    assert PhaseBudget(10, 8, 50).execute_limit() == 50  # eval: explicit budgets may exceed --max-tokens
    assert PhaseBudget(10, 8, 50).total == 58
    assert PhaseBudget(10, 8, 50, capped=True).execute_limit() == 2
    assert PhaseBudget(10, 30, None, capped=True).execute_limit() == 0
