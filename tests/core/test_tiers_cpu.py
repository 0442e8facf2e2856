"""The test tiers (tests/conftest.py): every test has one, and a test too slow for its tier fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TIER_LIMITS, over_tier_limit

ROOT = Path(__file__).resolve().parents[2]


def test_limits_by_tier_cpu() -> None:
    assert over_tier_limit("t", "unit", TIER_LIMITS["unit"] - 1) is None
    assert "mark it integration" in over_tier_limit("t", "unit", TIER_LIMITS["unit"] + 1)
    assert "mark it slow" in over_tier_limit("t", "integration", TIER_LIMITS["integration"] + 1)
    assert over_tier_limit("t", "slow", 10_000) is None  # the end-to-end tier has no limit
    assert over_tier_limit("t", "unit", TIER_LIMITS["unit"] + 1, scale=2) is None
    assert over_tier_limit("t", "unit", 10_000, scale=0) is None  # the check turned off


@pytest.mark.integration  # three collections of the whole suite, ~15 s each
def test_every_collected_test_has_one_tier_cpu() -> None:
    """Collection gives each test of the default command a tier marker: ``-m unit`` and ``-m integration``
    together select exactly what ``-m 'not slow and not gpu'`` selects."""

    def collected(marks: str) -> set[str]:
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", marks],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert r.returncode in (0, 5), r.stdout[-2000:] + r.stderr[-2000:]
        return {line for line in r.stdout.splitlines() if "::" in line}

    default = collected("not slow and not gpu")
    unit, integration = collected("unit"), collected("integration")
    assert len(default) > 1000 and unit and integration
    assert not unit & integration
    assert unit | integration == default
