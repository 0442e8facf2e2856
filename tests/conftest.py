"""Shared fixtures. Models are built into the toolkit cache (``$E2C_CACHE`` or ``~/.cache/e2c``) once
and reused across runs: the tiny model in seconds, the embedded one in about 40 s the first time."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2c.paths import benchmarks_dir

BENCH_DIR = benchmarks_dir()


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
    if not BENCH_DIR.is_dir():
        pytest.skip(f"benchmark copies not found at {BENCH_DIR} (set E2C_BENCH_DIR)")
    return BENCH_DIR


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
