"""The test tiers (tests/conftest.py): every test has one, and a test too slow for its tier is named (and
fails under E2C_TIER_STRICT=1)."""

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


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_test_over_its_limit_is_named_and_fails_only_when_strict_cpu(tmp_path: Path, workers: list) -> None:
    """A unit test over its limit is named at the end of the run (also from xdist workers); it fails the run
    only under E2C_TIER_STRICT=1, so a slow machine cannot turn a correct change red."""
    import os
    import subprocess
    import sys

    tests = Path(__file__).resolve().parents[1]
    (tmp_path / "test_sleepy.py").write_text(
        "import time\n\ndef test_sleepy():\n    time.sleep(0.3)\n\ndef test_quick():\n    pass\n"
    )
    cmd = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", *workers]
    cmd += ["--rootdir", str(tmp_path), str(tmp_path / "test_sleepy.py")]
    base = {**os.environ, "PYTHONPATH": str(tests), "E2C_TIER_LIMIT_SCALE": str(0.1 / 45)}  # a 0.1 s limit
    base.pop("E2C_TIER_STRICT", None)
    loose = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=base, cwd=tmp_path)
    assert loose.returncode == 0, loose.stdout[-2000:] + loose.stderr[-2000:]
    assert "tests over their tier's limit" in loose.stdout
    assert "test_sleepy.py::test_sleepy: a unit test took 0 s, over the unit tier's 0 s" in loose.stdout
    assert "test_quick: a unit" not in loose.stdout and "2 passed" in loose.stdout
    strict = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, env={**base, "E2C_TIER_STRICT": "1"}, cwd=tmp_path
    )
    assert strict.returncode == 1 and "1 failed, 1 passed" in strict.stdout, strict.stdout[-2000:]
    assert "mark it integration (one component, a real model) or slow" in strict.stdout
