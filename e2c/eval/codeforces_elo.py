"""A Codeforces rating estimated from an evaluation run: pass@n per problem against the problems' ratings.

Accepts DeepCoder's ``cf_elo_calc.py --results_path R --pass_n 8`` (``R``: a run folder, its ``results.json``
or a predictions file). The rating is the ``R`` at which the Elo-expected number of solved problems equals the
sum of their unbiased pass@n (bisection over [0, 4000]); it needs only the problems' ratings, not live contest
standings, and rests on assumptions the docs list (independent problems, Codeforces' Elo curve for a model).
More: docs/generation-and-evaluation.md, "A Codeforces rating from a run".

>>> round(estimate_rating([1.0, 0.0], [1500, 1500]), 3)
1500.0
>>> round(pass_at_n([True, False, False, False], 2), 3)
0.5
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import EXISTING_FILE, TEXT, whole
from e2c.commandline.entry import checks_done
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.data.registry import load_benchmark
from e2c.eval.runner import read_predictions

LOW, HIGH = 0.0, 4000.0
SCALE = 400.0
CODEFORCES_SETS = ("test_codeforces", "codeforces")


def solve_probability(rating: float, problem_rating: float) -> float:
    """The Elo expected score of a contestant rated ``rating`` against a problem rated ``problem_rating``."""
    return 1.0 / (1.0 + 10.0 ** ((problem_rating - rating) / SCALE))


def expected_solves(rating: float, problem_ratings: Sequence[float]) -> float:
    """``sum_i P(rating, r_i)``: the problems a contestant of this rating is expected to solve."""
    return sum(solve_probability(rating, r) for r in problem_ratings)


def estimate_rating(
    solved: Sequence[float],
    problem_ratings: Sequence[float],
    low: float = LOW,
    high: float = HIGH,
    tol: float = 1e-6,
) -> float:
    """The rating ``R`` in [low, high] whose expected solves equal ``sum(solved)`` (each entry a problem's
    pass@n in [0, 1]), by bisection: :func:`expected_solves` rises with ``R``. Clamped to the range's ends.

    >>> estimate_rating([1, 1, 0, 0], [800, 1200, 2000, 2400]) > 1200
    True
    """
    if len(solved) != len(problem_ratings) or not solved:
        raise UserError(f"need one pass@n per rated problem (got {len(solved)} and {len(problem_ratings)})")
    target = float(sum(solved))
    if expected_solves(low, problem_ratings) >= target:
        return low
    if expected_solves(high, problem_ratings) <= target:
        return high
    lo, hi = low, high
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if expected_solves(mid, problem_ratings) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def pass_at_n(correct: Sequence[bool], n: int) -> float:
    """The unbiased pass@n of one problem from its samples: ``1 - C(k - c, n) / C(k, n)`` for ``k`` samples, ``c``
    correct; UserError when there are fewer than ``n`` samples."""
    k, c = len(correct), sum(bool(x) for x in correct)
    if n < 1 or n > k:
        raise UserError(f"pass@{n} needs at least {n} samples per problem; this one has {k}")
    if k - c < n:
        return 1.0
    return 1.0 - math.comb(k - c, n) / math.comb(k, n)


def percentile(rating: float, distribution: dict[float, int]) -> float:
    """The share (in %) of contestants rated below ``rating`` in ``{rating: count}``."""
    ratings = sorted(r for r, c in distribution.items() for _ in range(int(c)))
    if not ratings:
        raise UserError("the ratings distribution is empty")
    return 100.0 * bisect.bisect_left(ratings, rating) / len(ratings)


# ---------------------------------------------------------------------------------------- run folders
@dataclass(frozen=True)
class Estimate:
    """A rating estimate and what it rests on."""

    dataset: str
    problems: int
    unrated: int
    pass_n: int
    solved: float
    rating: float
    percentile: float | None = None

    def lines(self) -> list[str]:
        out = [
            f"dataset: {self.dataset}",
            f"problems rated: {self.problems} (left out, no rating: {self.unrated})",
            f"solved (sum of pass@{self.pass_n}): {self.solved:.2f}",
            f"estimated Codeforces rating: {self.rating:.0f}",
        ]
        if self.percentile is not None:
            out.append(f"estimated percentile: {self.percentile:.1f}%")
        return out


def run_folder(path: Path) -> Path:
    """The run folder of ``--results_path`` (the folder, its results.json, or a file in predictions/)."""
    if path.is_dir():
        return path
    if path.name == "results.json" or path.suffix == ".json":
        return path.parent
    if path.suffix == ".jsonl" and path.parent.name == "predictions":
        return path.parent.parent
    raise UserError(
        f"--results_path {path}: give an eval run folder, its results.json, or a predictions file"
    )


def predictions_by_problem(path: Path) -> dict[str, list[bool]]:
    """``{problem id: [correct per sample]}`` from one predictions file (samples in order)."""
    out: dict[str, list[bool]] = {}
    for _, lines in sorted(read_predictions(path, repair=False).items()):
        for _, line in sorted(lines.items()):
            out.setdefault(str(line.get("id")), []).append(bool(line.get("correct")))
    return out


def pick_dataset(folder: Path, dataset: str | None) -> str:
    """The set to rate: ``dataset``, else the one Codeforces set the run has predictions for."""
    pred = folder / "predictions"
    have = sorted(p.stem for p in pred.glob("*.jsonl") if ".rank" not in p.name) if pred.is_dir() else []
    if dataset:
        if dataset not in have:
            raise UserError(
                f"--dataset {dataset}: no predictions/{dataset}.jsonl in {folder}; it has: {', '.join(have) or 'none'}"
            )
        return dataset
    found = [n for n in CODEFORCES_SETS if n in have]
    if not found:
        raise UserError(
            f"{folder}: no predictions of {' or '.join(CODEFORCES_SETS)} (it has: {', '.join(have) or 'none'}); "
            "name the set with --dataset"
        )
    return found[0]


def run_data_dir(folder: Path) -> str | None:
    """The ``--data-dir`` the run loaded its records from (``results.json``'s config), if any."""
    results = folder / "results.json"
    if not results.is_file():
        return None
    try:
        cfg = json.loads(results.read_text(encoding="utf-8")).get("config") or {}
    except (ValueError, OSError, AttributeError):
        return None
    d = cfg.get("data_dir") if isinstance(cfg, dict) else None
    return d if isinstance(d, str) and d else None


def ratings_of(records: Sequence[Any]) -> dict[str, float]:
    """``{record id: rating}`` for the records whose ``extra`` has a positive rating."""
    out = {}
    for r in records:
        v = (getattr(r, "extra", None) or {}).get("rating")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            out[r.id] = float(v)
    return out


def estimate_run(
    results_path: str | Path,
    pass_n: int = 1,
    dataset: str | None = None,
    data_dir: str | None = None,
    distribution: dict[float, int] | None = None,
) -> Estimate:
    """The rating estimate of one run folder's Codeforces predictions (see the module's text)."""
    folder = run_folder(Path(results_path))
    name = pick_dataset(folder, dataset)
    samples = predictions_by_problem(folder / "predictions" / f"{name}.jsonl")
    if not samples:
        raise UserError(f"{folder}/predictions/{name}.jsonl has no predictions")
    ratings = ratings_of(load_benchmark(name, data_dir or run_data_dir(folder)))
    if not ratings:
        raise UserError(
            f"{name}: its records carry no problem ratings (extra.rating); a Codeforces rating needs them"
        )
    rated = [pid for pid in samples if pid in ratings]
    if not rated:
        raise UserError(
            f"{name}: none of the {len(samples)} predicted problems has a rating in the loaded records"
        )
    solved = []
    for pid in rated:
        try:
            solved.append(pass_at_n(samples[pid], pass_n))
        except UserError as e:
            raise UserError(f"--pass_n {pass_n}: problem {pid}: {e}") from None
    rating = estimate_rating(solved, [ratings[p] for p in rated])
    pct = percentile(rating, distribution) if distribution else None
    return Estimate(name, len(rated), len(samples) - len(rated), pass_n, sum(solved), rating, pct)


def read_distribution(path: str | Path) -> dict[float, int]:
    """A ``{rating: count}`` JSON file (Codeforces' user ratings, as DeepCoder's ``ratings_2024.json``)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        dist = {float(k): int(v) for k, v in raw.items()}
    except (OSError, ValueError, AttributeError, TypeError) as e:
        raise UserError(
            f"--ratings-distribution {path}: not a JSON object of rating -> count ({type(e).__name__})"
        ) from None
    if not dist or any(c < 0 for c in dist.values()):
        raise UserError(f"--ratings-distribution {path}: no ratings, or a negative count")
    return dist


@dataclass(frozen=True)
class EloSettings:
    """The command line: each field is one flag (``python -m e2c.eval.codeforces_elo --help``)."""

    results_path: str = field(
        default="",
        metadata=setting(
            "eval run folder (or its results.json, or a predictions .jsonl) (required)",
            flag="--results-path",
            value=TEXT,
            required=True,
        ),
    )
    pass_n: int = field(
        default=1,
        metadata=setting(
            "submissions per problem: pass@n from the run's samples (default: 1)",
            flag="--pass-n",
            value=whole(1),
        ),
    )
    dataset: str | None = field(
        default=None,
        metadata=setting(
            f"the set to rate (default: the run's {' or '.join(CODEFORCES_SETS)})",
            flag="--dataset",
            value=TEXT,
        ),
    )
    data_dir: str | None = field(
        default=None,
        metadata=setting(
            "where the set's records are (default: the run's --data-dir, then the usual places)",
            flag="--data-dir",
            value=TEXT,
        ),
    )
    ratings_distribution: str | None = field(
        default=None,
        metadata=setting(
            "JSON {rating: count} of contestants, for a percentile (default: none)",
            flag="--ratings-distribution",
            value=EXISTING_FILE,
        ),
    )


def build_parser() -> Any:

    p = ArgumentParser(prog="cf_elo_calc.py", description=__doc__.splitlines()[0])
    add_setting_flags(p, EloSettings)
    return p


def main(argv: Sequence[str] | None = None) -> int:

    args = from_flags(build_parser().parse_args(argv), EloSettings)
    dist = read_distribution(args.ratings_distribution) if args.ratings_distribution else None
    checks_done()
    est = estimate_run(args.results_path, args.pass_n, args.dataset, args.data_dir, dist)
    print("\n".join(est.lines()))
    return 0
