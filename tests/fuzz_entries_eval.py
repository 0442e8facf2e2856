"""Entry points of evaluation, test-time scaling and the demos for the generated bad-input test (see ``fuzz_entries.py``)."""

from __future__ import annotations

from entry_fuzz import Entry

from e2c.paths import benchmarks_dir

BENCH = str(benchmarks_dir())
GSM8K = f"{BENCH}/gsm8k.jsonl"

ENTRIES: dict[str, Entry] = {
    "e2c.eval.score": Entry("e2c.eval.score", (GSM8K, "--response-key", "answer", "--format", "none")),
}
