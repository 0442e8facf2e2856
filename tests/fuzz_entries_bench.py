"""Entry points of the benchmark scripts (bench/) for the generated bad-input test (see ``fuzz_entries.py``).

Each good command line asks for the smallest run on the tiny model, so that the checks it passes (a model
reference, the benchmark copies in ``BENCH``, an output folder under ``{tmp}``) are quick; the check-only run
stops at ``checks_done()`` before any model is loaded or any subprocess started."""

from __future__ import annotations

from bench_fixture import bench_dir
from entry_fuzz import Entry

BENCH = str(bench_dir())
GSM8K = f"{BENCH}/gsm8k.jsonl"


def _bench(script: str, *good: str) -> tuple[str, Entry]:
    target = f"bench/{script}.py"
    return target, Entry(target, good)


ENTRIES: dict[str, Entry] = dict(
    [
        _bench("grader", "--n", "2", "--workers", "1", "--data-dir", BENCH),
        _bench("grader_hostile", "--repeat", "1"),
        _bench("view", "--chains", "10", "--browser", "none", "--out", "{tmp}/view.html"),
        _bench("code_sandbox", "--limit", "1", "--trivial", "1", "--workers", "1"),
        _bench(
            "dtype_numerics",
            *("--model", "tiny", "--data-dir", BENCH, "--dataset", "gsm8k", "--limit", "2"),
            *("--arms", "hf:float32,hf:bfloat16", "--out", "{tmp}/numerics"),
        ),
        _bench(
            "eval_throughput",
            *("--model", "tiny", "--data-dir", BENCH, "--problems", "2", "--samples", "1"),
            *("--max-tokens", "4", "--arms", "hf:float32", "--json", "{tmp}/throughput.json"),
        ),
        _bench("lora_cost", "--model", "tiny", "--steps", "2", "--arms", "sft", "--out", "{tmp}/lora"),
        _bench("model_arithmetic", "--model", "tiny", "--per-kind", "1", "--backend", "hf"),
        _bench("multirank", "--out", "{tmp}/multirank", "--runs", "sft1"),
        _bench(
            "rl_cpu_step",
            *("--model", "tiny", "--data-dir", BENCH, "--prompts", "2", "--n", "2", "--steps", "1"),
            *("--keep", "{tmp}/rl"),
        ),
        _bench(
            "rl_memory",
            *("--model", "tiny", "--samples", "4", "--n", "2", "--response-length", "24"),
            *("--out", "{tmp}/rl_memory"),
        ),
        _bench("rl_overhead", "--model", "tiny", "--steps", "2"),
        _bench("synthetic_data", "--n", "5", "--tokenizer", "tiny"),
        _bench("tag_init", "--steps", "1", "--batch", "1"),
        _bench(
            "train_speed",
            *("--model", "tiny", "--sft-steps", "2", "--rl-steps", "1", "--arms", "now"),
            *("--keep", "{tmp}/speed"),
        ),
        _bench("vllm_sampling", "--model", "tiny", "--prompts", "1", "--tokens", "1"),
    ]
)
