"""The test tiers (tests/conftest.py): every test has one, and a test too slow for its tier fails."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import LONG_FILES, MODEL_FIXTURES, TIER_LIMITS, file_rank, over_tier_limit


def test_limits_by_tier_cpu() -> None:
    assert over_tier_limit("t", "unit", TIER_LIMITS["unit"] - 1) is None
    assert "mark it integration" in over_tier_limit("t", "unit", TIER_LIMITS["unit"] + 1)
    assert "mark it slow" in over_tier_limit("t", "integration", TIER_LIMITS["integration"] + 1)
    assert over_tier_limit("t", "slow", 10_000) is None  # the end-to-end tier has no limit
    assert over_tier_limit("t", "unit", TIER_LIMITS["unit"] + 1, scale=2) is None
    assert over_tier_limit("t", "unit", 10_000, scale=0) is None  # the check turned off


def test_every_collected_test_has_one_tier_cpu(request: pytest.FixtureRequest) -> None:
    """Every test this run collected has exactly one tier: ``slow`` or ``gpu`` (as marked), else
    ``integration`` or ``unit`` (given at collection, :func:`conftest.pytest_collection_modifyitems`)."""
    items = request.session.items
    assert items and any(i.nodeid == request.node.nodeid for i in items)
    problems = []
    for item in items:
        tiers = [t for t in ("slow", "gpu", "integration", "unit") if item.get_closest_marker(t)]
        if tiers not in (["slow"], ["gpu"], ["slow", "gpu"], ["integration"], ["unit"]):
            problems.append(f"{item.nodeid}: {tiers}")
        uses_model = MODEL_FIXTURES & set(getattr(item, "fixturenames", ()))
        if uses_model and tiers == ["unit"]:
            problems.append(f"{item.nodeid}: asks for {sorted(uses_model)} but is a unit test")
    assert not problems, "\n".join(problems[:50])


def test_the_longest_files_are_real_and_run_first_cpu() -> None:
    tests = Path(__file__).resolve().parents[1]
    assert [f for f in LONG_FILES if not (tests / f).is_file()] == []  # a renamed file would lose its place
    assert file_rank(f"tests/{LONG_FILES[0]}::test_x") == 0
    assert file_rank("tests/core/test_tiers_cpu.py::test_x") == len(LONG_FILES)
    ranks = [file_rank(f"tests/{f}::t") for f in LONG_FILES]
    assert ranks == sorted(ranks) == list(range(len(LONG_FILES)))
