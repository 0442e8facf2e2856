"""The Codeforces rating estimate (e2c/eval/codeforces_elo.py, scripts/deepcoder/benchmark/cf_elo_calc.py):
bisection against a plain grid loop, pass@n against enumeration, and the command on a run folder."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from e2c.core.errors import UserError
from e2c.eval import codeforces_elo as elo

ROOT = Path(__file__).resolve().parents[2]


def _grid_rating(solved: list[float], ratings: list[float], step: float = 0.01) -> float:
    """The reference: the grid point in [0, 4000] whose expected solves are closest to the observed."""
    target = sum(solved)
    best, best_gap = 0.0, float("inf")
    r = 0.0
    while r <= 4000.0:
        gap = abs(sum(1 / (1 + 10 ** ((x - r) / 400)) for x in ratings) - target)
        if gap < best_gap:
            best, best_gap = r, gap
        r += step
    return best


@pytest.mark.parametrize("seed", range(4))
def test_bisection_equals_a_fine_grid(seed: int) -> None:
    rng = random.Random(seed)
    ratings = [rng.choice(range(800, 3600, 100)) for _ in range(12)]
    solved = [rng.choice([0.0, 0.25, 1.0]) for _ in ratings]
    if sum(solved) in (0, len(solved)):
        solved[0] = 0.5
    got = elo.estimate_rating(solved, ratings)
    assert abs(got - _grid_rating(solved, ratings, step=0.05)) <= 0.05
    assert abs(elo.expected_solves(got, ratings) - sum(solved)) < 1e-6


def test_estimate_ends_and_symmetry() -> None:
    assert elo.estimate_rating([0, 0], [1000, 2000]) == 0.0
    assert elo.estimate_rating([1, 1], [1000, 2000]) == 4000.0
    assert elo.estimate_rating([0.5], [1700]) == pytest.approx(1700.0, abs=1e-5)  # half a game: its rating
    assert elo.solve_probability(2000, 1600) == pytest.approx(10 / 11)  # 400 points: odds of 10 to 1
    with pytest.raises(UserError, match="one pass@n per rated problem"):
        elo.estimate_rating([], [])


def test_pass_at_n_equals_enumeration() -> None:
    for correct in ([True, False, False, False], [False] * 3 + [True] * 2, [True] * 4, [False] * 5):
        for n in range(1, len(correct) + 1):
            draws = list(itertools.combinations(range(len(correct)), n))
            want = sum(any(correct[i] for i in d) for d in draws) / len(draws)
            assert elo.pass_at_n(correct, n) == pytest.approx(want)
    with pytest.raises(UserError, match="pass@8 needs at least 8 samples per problem; this one has 2"):
        elo.pass_at_n([True, False], 8)


def test_percentile() -> None:
    dist = {1000.0: 2, 1500.0: 1, 2000.0: 1}
    assert elo.percentile(1500.0, dist) == 50.0 and elo.percentile(2500.0, dist) == 100.0


def _run_folder(tmp_path: Path, samples: dict[str, list[bool]], ratings: dict[str, int | None]) -> Path:
    data = tmp_path / "data"
    data.mkdir(parents=True)
    rows = []
    for pid, rating in ratings.items():
        meta = {"rating": rating} if rating else {}
        rows.append({"id": pid, "problem": f"Problem {pid}.", "tests": '[{"input": "1", "output": "1"}]',
                     "metadata": json.dumps(meta)})  # fmt: skip
    (data / "test_codeforces.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    lines = [
        {"dataset": "test_codeforces", "index": i, "id": f"test_codeforces-{pid}", "sample": j, "correct": c}
        for i, (pid, cs) in enumerate(samples.items())
        for j, c in enumerate(cs)
    ]
    (run / "predictions" / "test_codeforces.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (run / "results.json").write_text(json.dumps({"config": {"data_dir": str(data)}, "datasets": {}}))
    return run


def test_estimate_from_a_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    samples = {"a": [True, True], "b": [True, False], "c": [False, False], "d": [True, True]}
    run = _run_folder(tmp_path, samples, {"a": 800, "b": 1600, "c": 2400, "d": None})
    est = elo.estimate_run(run / "results.json", pass_n=1)
    assert (est.dataset, est.problems, est.unrated, est.solved) == ("test_codeforces", 3, 1, 1.5)
    assert est.rating == pytest.approx(elo.estimate_rating([1.0, 0.5, 0.0], [800, 1600, 2400]))
    assert elo.estimate_run(run, pass_n=2).solved == 2.0
    with pytest.raises(UserError, match="--pass_n 3: problem test_codeforces-a: pass@3 needs at least 3"):
        elo.estimate_run(run, pass_n=3)
    with pytest.raises(UserError, match=r"--dataset gsm8k: no predictions/gsm8k\.jsonl"):
        elo.estimate_run(run, dataset="gsm8k")


def test_cf_elo_calc_command(tmp_path: Path) -> None:
    run = _run_folder(tmp_path, {"a": [True] * 8, "b": [False] * 7 + [True]}, {"a": 1200, "b": 2000})
    dist = tmp_path / "ratings.json"
    dist.write_text(json.dumps({"1000": 5, "1500": 5}))
    cmd = [sys.executable, "scripts/deepcoder/benchmark/cf_elo_calc.py", "--results_path", str(run), "--pass_n", "8",
           "--ratings-distribution", str(dist)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "estimated Codeforces rating: 4000" in res.stdout and "estimated percentile: 100.0%" in res.stdout
    no_ratings = _run_folder(tmp_path / "x", {"a": [True]}, {"a": None})
    res = subprocess.run([*cmd[:3], str(no_ratings)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert "carry no problem ratings" in res.stderr
