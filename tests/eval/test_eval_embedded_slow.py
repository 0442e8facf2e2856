"""The embedded SmolLM2-135M through the whole evaluation on a few real GSM8K problems (slow: ~2-4 min)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2c.data.registry import load_benchmark
from e2c.eval.runner import EvalConfig, run_eval
from e2c.generation import make_generator

pytestmark = pytest.mark.slow


def test_embedded_model_on_gsm8k(bench_dir: Path, tmp_path: Path) -> None:
    records = load_benchmark("gsm8k", bench_dir, limit=3, use_hub=False)
    gen, _ = make_generator("hf", "embedded", batch_size=8)
    cfg = EvalConfig(
        model="embedded",
        samples=2,
        max_tokens=160,
        explore_budget=64,
        temperature=0.7,
        top_p=0.95,
        opener="I need to make a step-by-step plan.\n1.",
        chunk_size=8,
    )
    out = run_eval(gen, {"gsm8k": records}, cfg, tmp_path)
    m = out["datasets"]["gsm8k"]
    assert (m["problems"], m["samples"]) == (3, 6)
    assert 0.0 <= m["pass@1"] <= 1.0 and 0.0 <= m["format_rate"] <= 1.0
    lines = [json.loads(x) for x in (tmp_path / "predictions" / "gsm8k.jsonl").read_text().splitlines()]
    assert len(lines) == 6
    for line in lines:
        assert 0 < line["explore_tokens"] <= 64 and line["execute_tokens"] <= 96
        assert "</EXPLORATION><EXECUTION>" in line["response"]  # closed by the model or for it
        assert line["gold"] == records[line["index"]].answer
    assert out["usage"]["generated_tokens"] == sum(x["explore_tokens"] + x["execute_tokens"] for x in lines)
