"""Entry points of data preparation, the quickstart, the claims run and the study runner for the generated bad-input test (see ``fuzz_entries.py``).

Each good command line is the quickest one that passes every check: prepare offline with no synthetic data
(no tokenizer to load), the download against a closed port (the check-only run stops before the network),
the pass-rate filter on the tiny model with a two-row RL file made here, and the quickstart and the claims
run with ``--fast`` (the tiny model) into a fresh folder under ``{tmp}``."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from bench_fixture import bench_dir
from entry_fuzz import Entry

from e2c.chain import E2C
from e2c.data.io import write_parquet

BENCH = str(bench_dir())
KEPT_REPORT = Path(__file__).resolve().parents[1] / "docs" / "runs" / "quickstart" / "report.json"
GSM8K = f"{BENCH}/gsm8k.jsonl"


def _rl_file() -> str:
    """A two-row RL parquet in verl's schema, for the pass-rate filter's --input (removed at exit)."""
    folder = Path(tempfile.mkdtemp(prefix="e2c-fuzz-data-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    rows = [
        {
            "prompt": E2C.messages(f"What is {i} + 10?"),
            "data_source": "synthetic/arithmetic",
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(i + 10)},
            "extra_info": {"index": i, "kind": "math", "difficulty": 1},
        }
        for i in range(2)
    ]
    return str(write_parquet(rows, folder / "rl.parquet"))


RL_FILE = _rl_file()

ENTRIES: dict[str, Entry] = {
    "e2c.data.prepare": Entry(
        "e2c.data.prepare",
        ("--skip-download", "--synthetic", "0", "--raw", "{tmp}/raw", "--out", "{tmp}/processed"),
    ),
    "e2c.data.download": Entry(
        "e2c.data.download", ("--dataset", "eval", "--endpoint", "http://127.0.0.1:9", "--out", "{tmp}/raw")
    ),
    "e2c.rl.passrate.cli": Entry(
        "e2c.rl.passrate.cli",
        ("--model", "tiny", "--input", RL_FILE, "--output", "{tmp}/kept.parquet", "--backend", "hf"),
        env={"HF_HUB_OFFLINE": "1"},
    ),
    "e2c.quickstart.cli": Entry("e2c.quickstart.cli", ("--fast", "--out", "{tmp}/quickstart")),
    "e2c.quickstart.trained": Entry("e2c.quickstart.trained", ("--out", "{tmp}/quickstart")),
    "e2c.claims.cli": Entry("e2c.claims.cli", ("--fast", "--out", "{tmp}/claims")),
    "e2c.study.cli": Entry(
        "e2c.study.cli", ("--study", "configs/study/sft_length.toml", "--fast", "--out", "{tmp}/study")
    ),
    "e2c.study.reproduce": Entry("e2c.study.reproduce", ("--fast", "--out", "{tmp}/reproduce")),
    "e2c.quickstart.readme": Entry("e2c.quickstart.readme", ("--report", str(KEPT_REPORT))),
}
