"""Reference solutions in ../shared/data/benchmarks graded against their own answers, and shuffled pairs.

Agreement is a property of the data as much as of the grader: AIME solutions are prose whose last
number is not always the answer, and a few medical rows have duplicate option texts. Thresholds are the
measured values (rounded down), so a grader regression fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2c.eval.score import score_file, summarize
from e2c.rewards import grade_many
from e2c.rewards.math_equiv import quick_equal

# file, response key, answer key, kind, extra flags, minimum agreement
CASES = [
    ("gsm8k.jsonl", "answer", "answer", "math", {}, 1.0),
    ("minerva_math.jsonl", "solution", "solution", "math", {}, 1.0),
    ("aime24.jsonl", "solution", "answer", "math", {"fallback_number": True}, 0.96),
    ("medqa.jsonl", "answer", "answer_idx", "mcq", {}, 0.999),
    ("medmcqa.jsonl", "answer", "answer_idx", "mcq", {}, 0.999),
    ("mmlu_medical.jsonl", "answer", "answer_idx", "mcq", {}, 1.0),
]


@pytest.mark.parametrize(("name", "rkey", "akey", "kind", "extra", "minimum"), CASES)
def test_reference_solutions_agree(real_bench_dir: Path, name, rkey, akey, kind, extra, minimum) -> None:
    _, results = score_file(real_bench_dir / name, rkey, akey, kind=kind, chain_format="none", **extra)
    s = summarize(results)
    assert s["timeout"] == 0 and s["unparseable_gold"] == 0
    assert s["accuracy"] >= minimum, s


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open() if line.strip()]


def test_shuffled_math_pairs_grade_incorrect(real_bench_dir: Path) -> None:
    rows = _rows(real_bench_dir / "gsm8k.jsonl")[:400]
    golds = [r["answer"] for r in rows]
    rotated = golds[1:] + golds[:1]
    res = grade_many([r["answer"] for r in rows], rotated, fmt=None)
    # The only matches allowed are pairs whose two reference answers really are equal numbers.
    really_equal = [quick_equal(a.split("####")[-1], b.split("####")[-1]) for a, b in zip(golds, rotated)]
    assert [r.correct for r in res] == really_equal
    assert sum(really_equal) < 20


def test_shuffled_minerva_pairs_grade_incorrect(real_bench_dir: Path) -> None:
    rows = _rows(real_bench_dir / "minerva_math.jsonl")
    sols = [r["solution"] for r in rows]
    rotated = sols[7:] + sols[:7]
    res = grade_many(sols, rotated, fmt=None)
    assert sum(r.correct for r in res) <= 0.05 * len(rows)


def test_shuffled_mcq_pairs_grade_incorrect(real_bench_dir: Path) -> None:
    rows = _rows(real_bench_dir / "medqa.jsonl")
    golds = [r["answer_idx"] for r in rows]
    rotated = golds[1:] + golds[:1]
    res = grade_many(
        [r["answer"] for r in rows], rotated, "mcq", options=[r["options"] for r in rows], fmt=None
    )
    expected = [a == b for a, b in zip(golds, rotated)]
    correct = [r.correct for r in res]
    assert sum(c and not e for c, e in zip(correct, expected)) <= 1
