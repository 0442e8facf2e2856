"""Entry points of training (SFT, RL, the curriculum, the cluster, stage-argument and recipe checks) for the generated bad-input test (see ``fuzz_entries.py``).

The launchers read their data before ``checks_done()``: a small SFT and RL parquet are written once, when
the registry is imported, into a folder of their own (removed at exit). Every good command line uses the
tiny model and writes under ``{tmp}``; none gets further than its checks.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from bench_fixture import bench_dir
from conftest import arithmetic_rl_rows
from entry_fuzz import Entry

from e2c.data.io import write_parquet
from e2c.data.synthetic.generate import generate, rows_by_split

BENCH = str(bench_dir())
GSM8K = f"{BENCH}/gsm8k.jsonl"

DATA = Path(tempfile.mkdtemp(prefix="e2c-fuzz-train-"))
atexit.register(shutil.rmtree, DATA, True)
SFT = str(write_parquet(rows_by_split(generate(12, seed=0)[0])["sft"], DATA / "sft.parquet"))
RL = str(write_parquet(arithmetic_rl_rows(8), DATA / "rl.parquet"))
# An RL run folder as python -m e2c.rl.health reads it (a folder without metrics.jsonl is refused).
RUN = DATA / "rl-run"
RUN.mkdir()
(RUN / "metrics.jsonl").write_text('{"step": 1, "data": {"health/zero_var_group_share": 1.0}}\n')

# The run's shape comes from flags, not from the machine or the caller's environment: no GPU, one node.
CPU = {"E2C_FORCE_CPU": "1", "N_GPUS": "", "NNODES": "", "NODE_RANK": "", "RAY_ADDRESS": ""}

ENTRIES: dict[str, Entry] = {
    "e2c.sft.run": Entry(
        "e2c.sft.run",
        (
            "--model",
            "tiny",
            "--gpus",
            "0",
            "--train-data",
            SFT,
            "--val-data",
            "none",
            "--output-dir",
            "{tmp}/sft",
        ),
        env=CPU,
    ),
    "e2c.rl.launch": Entry(
        "e2c.rl.launch",
        ("--stage", "1", "--model", "tiny", "--train-data", RL, "--val-data", RL, "--output-dir", "{tmp}/rl"),
        env=CPU,
    ),
    "e2c.rl.curriculum": Entry(
        "e2c.rl.curriculum",
        ("--model", "tiny", "--train-data", RL, "--val-data", RL, "--output-dir", "{tmp}/curriculum"),
        env=CPU,
    ),
    "e2c.rl.health.cli": Entry("e2c.rl.health.cli", (str(RUN),)),
    "e2c.rl.plugin": Entry("e2c.rl.plugin", ()),
    "e2c.launch.cluster": Entry(
        "e2c.launch.cluster", ("--address", "127.0.0.1:6379", "--nodes", "2", "--timeout", "1")
    ),
    "e2c.recipe_check": Entry("e2c.recipe_check", ("--gpus", "8", "--nnodes", "2"), env=CPU),
    "e2c.stage_args": Entry("e2c.stage_args", ("grpo", "--stage", "1", "--model", "tiny")),
}
