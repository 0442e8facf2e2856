"""Shared fixtures. Models are built into the toolkit cache (``$E2C_CACHE`` or ``~/.cache/e2c``) once
and reused across runs: the tiny model in seconds, the embedded one in about 40 s the first time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bench_fixture import HAVE_REAL, MISSING, REAL
from bench_fixture import bench_dir as _bench_dir

BENCH_DIR = _bench_dir()  # the real copies, else the stand-in (tests/bench_fixture.py)
# Commands the tests start read their default data folder from here, so they find the same files.
os.environ.setdefault("E2C_BENCH_DIR", str(BENCH_DIR))


@pytest.fixture(scope="session")
def tiny_path() -> str:
    from e2c.models import resolve_model

    return resolve_model("tiny").path


@pytest.fixture(scope="session")
def tiny_tok(tiny_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_path)


@pytest.fixture(scope="session")
def embedded_path() -> str:
    from e2c.models import resolve_model

    return resolve_model("embedded").path


@pytest.fixture(scope="session")
def embedded_tok(embedded_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_path)


@pytest.fixture(scope="session")
def bench_dir() -> Path:
    """Benchmark files in every source's layout: the real copies, else the stand-in."""
    return BENCH_DIR


@pytest.fixture(scope="session")
def real_bench_dir() -> Path:
    """The real benchmark copies, for tests about their content; skipped where they are missing."""
    if not HAVE_REAL:
        pytest.skip(MISSING)
    return REAL


def arithmetic_rl_rows(n: int = 16) -> list[dict]:
    """verl RL rows of small sums (what the tiny-model training tests train on); difficulty 1-3 in turn."""
    rows = []
    for i in range(n):
        a, b = 3 + i, 4 + 2 * i
        rows.append(
            {
                "prompt": [{"role": "user", "content": f"What is {a} + {b}? Put the answer in \\boxed{{}}."}],
                "data_source": "synthetic/arithmetic",
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"index": i, "kind": "math", "difficulty": 1 + i % 3},
            }
        )
    return rows
