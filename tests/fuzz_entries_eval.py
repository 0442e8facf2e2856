"""Entry points of evaluation, test-time scaling and the demos for the generated bad-input test (see ``fuzz_entries.py``)."""

from __future__ import annotations

from pathlib import Path

from bench_fixture import bench_dir
from entry_fuzz import Entry

ROOT = Path(__file__).resolve().parents[1]

BENCH = str(bench_dir())
GSM8K = f"{BENCH}/gsm8k.jsonl"
EVAL_RUN = str(ROOT / "tests" / "fixtures" / "eval_run")  # a finished run folder, as e2c.eval.run writes it
# The tiny model (built offline in seconds, then cached) through the transformers backend: no hub, no GPU.
TINY = ("--model", "tiny", "--backend", "hf")
EVAL = (*TINY, "--dataset", "gsm8k", "--data-dir", BENCH, "--limit", "2", "--output-dir", "{tmp}/eval")
TTS = (
    *TINY,
    *("--dataset", "gsm8k", "--data-dir", BENCH, "--limit", "1", "--methods", "greedy_cot", "--budgets", "1"),
    *("--set", "cot_tokens=8", "--output-dir", "{tmp}/tts"),
)
ELASTIC = (
    *("--model", "tiny", "--datasets", "gsm8k", "--output-dir", "{tmp}/elastic", "--n", "1"),
    *("--max-length", "16", "--backend", "hf", "--data-dir", BENCH, "--limit", "1"),
)
DEMO = (*TINY, "--max-tokens", "16", "--explore-budget", "8")

ENTRIES: dict[str, Entry] = {
    "e2c.eval.score": Entry("e2c.eval.score", (GSM8K, "--response-key", "answer", "--format", "none")),
    "e2c.sandbox.cli": Entry("e2c.sandbox.cli", ("check", "--sandbox", "local")),  # python -m e2c.sandbox
    "e2c.eval.run": Entry("e2c.eval.run", EVAL),
    "e2c.eval.elastic": Entry("e2c.eval.elastic", ELASTIC),
    "e2c.eval.compare": Entry(
        "e2c.eval.compare", (EVAL_RUN, EVAL_RUN, "--labels", "a", "b", "--plot-dir", "{tmp}/plots")
    ),
    "e2c.view.cli": Entry("e2c.view.cli", (EVAL_RUN, "--out", "{tmp}/view.html")),  # python -m e2c.view
    "e2c.tts.cli": Entry("e2c.tts.cli", TTS),  # python -m e2c.tts
    "tts/run_tts.py": Entry("tts/run_tts.py", TTS),
    "tts/scripts/download_aime2024.py": Entry("tts/scripts/download_aime2024.py", ("--out", "{tmp}/aime")),
    "example_inference.py": Entry("example_inference.py", DEMO),
    "example_interactive.py": Entry("example_interactive.py", DEMO),
}
