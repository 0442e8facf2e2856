"""Entry points of training (SFT, RL, the curriculum, the cluster and recipe checks) for the generated bad-input test (see ``fuzz_entries.py``)."""

from __future__ import annotations

from entry_fuzz import Entry

from e2c.paths import benchmarks_dir

BENCH = str(benchmarks_dir())
GSM8K = f"{BENCH}/gsm8k.jsonl"

ENTRIES: dict[str, Entry] = {}
