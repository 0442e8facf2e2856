"""Synthetic E2C tasks: every sample verified, splits disjoint, same seed byte-identical, limits enforced."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from e2c.chain import E2C
from e2c.data.io import write_parquet
from e2c.data.schema import validate_rows
from e2c.data.synthetic import families
from e2c.data.synthetic import generate as gen
from e2c.data.synthetic.families import FAMILIES, LEVELS
from e2c.data.synthetic.tracer import run_traced
from e2c.rewards import countdown
from e2c.rewards.extract import last_boxed
from e2c.rewards.grader import grade
from e2c.rewards.plan import plan_adherence

N = 1200


@pytest.fixture(scope="module")
def made():
    return gen.generate(N, seed=7)


def test_count_and_coverage(made) -> None:
    samples, report = made
    solve = [s for s in samples if s.variant == "solve"]
    assert len(solve) == N and report.total == len(samples)
    assert {(s.family, s.level) for s in solve} == {(f, lv) for f in FAMILIES for lv in LEVELS}
    assert len(FAMILIES) >= 8
    assert Counter(s.split for s in solve).keys() == {"sft", "rl", "eval"}
    assert any(s.variant == "trace" for s in samples)
    assert all(s.split == "sft" for s in samples if s.variant == "trace")


def test_every_sample_verified_by_the_grader(made) -> None:
    samples, _ = made
    for s in samples:
        chain = E2C.format_response(s.exploration, s.execution)
        res = grade(chain, s.gold, s.kind, fmt=E2C)  # type: ignore[arg-type]
        assert res.correct and res.chain_status == "ok", (s.problem, res)
        if s.variant == "solve":
            assert plan_adherence(s.exploration, s.execution) == 1.0, s.problem
        if s.kind == "countdown":
            assert countdown.check(last_boxed(s.execution), s.gold) == (True, "ok")


def test_splits_share_no_problem(made) -> None:
    samples, _ = made
    by_split: dict[str, set[str]] = {}
    for s in samples:
        by_split.setdefault(s.split, set()).add(s.problem)
    assert not (by_split["sft"] & by_split["rl"]) and not (by_split["sft"] & by_split["eval"])
    assert not (by_split["rl"] & by_split["eval"])
    solve = [s.problem for s in samples if s.variant == "solve"]
    assert len(solve) == len(set(solve))


def test_rows_fit_their_schemas(made) -> None:
    rows = gen.rows_by_split(made[0])
    assert validate_rows(rows["sft"], "sft", "sft") == len(rows["sft"])
    assert validate_rows(rows["rl"], "rl", "rl") == len(rows["rl"])
    assert validate_rows(rows["eval"], "eval", "eval") == len(rows["eval"])


def _digest(seed: int, tmp: Path) -> dict[str, str]:
    samples, _ = gen.generate(300, seed=seed)
    out = {}
    for split, rows in gen.rows_by_split(samples).items():
        p = write_parquet(rows, tmp / f"{seed}-{split}.parquet")
        out[split] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_same_seed_byte_identical(tmp_path: Path) -> None:
    a, b = _digest(3, tmp_path / "a"), _digest(3, tmp_path / "b")
    assert a == b
    assert _digest(4, tmp_path / "c") != a


def test_wrong_reference_program_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    real = families.gcd_lcm

    def broken(rng, level):
        task = real(rng, level)
        task.expected += 1  # the independent answer no longer matches the program
        task.answer = str(task.expected)
        return task

    monkeypatch.setitem(FAMILIES, "gcd_lcm", broken)
    samples, report = gen.generate(80, seed=1)
    assert report.dropped["program_disagrees"] > 0
    assert not any(s.family == "gcd_lcm" for s in samples)
    for name in list(FAMILIES):
        monkeypatch.setitem(FAMILIES, name, broken)
    with pytest.raises(RuntimeError, match=r"no sample of \d+ verified; dropped"):
        gen.generate(20, seed=1)


def test_tracer_limits_and_events() -> None:
    ok = "def solve():\n    a, b = 48, 18\n    while b != 0:\n        a, b = b, a % b\n    return a\n"
    spin = "def solve():\n    x = 0\n    while True:\n        x += 1\n"
    hog = "def solve():\n    x = [0] * (10 ** 10)\n    return 1\n"
    escape = "def solve():\n    return open('/etc/passwd').read()\n"
    r_ok, r_spin, r_hog, r_escape = run_traced([ok, spin, hog, escape], max_events=500)
    assert r_ok.ok and r_ok.value == 6
    # Each event is (line, the variables that line changed): a plain loop reproduces them.
    a, b, expected = 48, 18, [(2, {"a": 48, "b": 18})]
    while b != 0:
        expected.append((3, {}))
        a, b = b, a % b
        expected.append((4, {"a": a, "b": b}))
    expected += [(3, {}), (5, {})]  # the loop test that fails, then the return line
    assert r_ok.events == expected
    assert "more than 500 line events" in (r_spin.error or "")
    assert "MemoryError" in (r_hog.error or "")
    assert "NameError" in (r_escape.error or "")  # no open() among the allowed builtins
