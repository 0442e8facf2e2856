"""``sdpa_varlen``: a packed row attends within each sequence, as the sequences alone would, and anything else
is transformers' ``sdpa`` (e2c/verl_cpu/attention.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.verl_cpu.attention import NAME, packed_bounds, register


def packed_bounds_reference(pos: list[int]) -> list[int] | None:
    """The plain loop: a new sequence wherever a position is not its predecessor + 1, and it must be 0."""
    if len(pos) < 2 or pos[0] != 0:
        return None
    bounds = [0]
    for i in range(1, len(pos)):
        if pos[i] != pos[i - 1] + 1:
            if pos[i] != 0:
                return None
            bounds.append(i)
    return [*bounds, len(pos)] if len(bounds) > 1 else None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=0, max_size=40))
def test_packed_bounds_equals_the_reference_loop_on_any_positions_cpu(pos: list[int]) -> None:
    got = packed_bounds(torch.tensor([pos], dtype=torch.long)) if pos else None
    assert got == packed_bounds_reference(pos)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=8))
def test_packed_bounds_of_real_packings_are_their_lengths_cpu(lengths: list[int]) -> None:
    pos = torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0)
    bounds = packed_bounds(pos)
    if len(lengths) == 1:
        assert bounds is None  # one sequence: sdpa's own causal path
    else:
        assert bounds is not None
        assert [b - a for a, b in pairwise(bounds)] == lengths
    # mrope's 3-row positions read the first row
    assert packed_bounds(pos.unsqueeze(0).expand(3, 1, -1)) == bounds


@pytest.fixture(scope="module")
def tiny_models(tiny_path: str):
    from transformers import AutoModelForCausalLM

    register()
    models = {}
    for impl in ("sdpa", NAME):
        torch.manual_seed(0)
        models[impl] = AutoModelForCausalLM.from_pretrained(
            tiny_path, attn_implementation=impl, dtype=torch.float32
        )
    return models


def _logits_and_grads(model, ids, pos, mask=None):
    model.zero_grad()
    out = model(input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=False).logits
    out.float().logsumexp(-1).sum().backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return out.detach(), grads


def test_a_packed_row_equals_its_sequences_alone_and_sdpas_masked_row_cpu(tiny_models) -> None:
    lengths = [7, 12, 1, 9]
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(10, 500, (1, n), generator=g) for n in lengths]
    ids = torch.cat(seqs, dim=1)
    pos = torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0)
    varlen, varlen_grads = _logits_and_grads(tiny_models[NAME], ids, pos)
    masked, masked_grads = _logits_and_grads(tiny_models["sdpa"], ids, pos)
    with torch.no_grad():
        alone = torch.cat([tiny_models["sdpa"](input_ids=s, use_cache=False).logits for s in seqs], dim=1)
    torch.testing.assert_close(varlen, alone, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(varlen, masked, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(varlen_grads, masked_grads, rtol=1e-3, atol=1e-5)
    # and the packing matters: attending across the row (one causal sequence) gives other logits
    with torch.no_grad():
        across = tiny_models["sdpa"](input_ids=ids, use_cache=False).logits
    assert (across - alone).abs().max() > 1e-2


def test_anything_not_packed_is_sdpa_cpu(tiny_models) -> None:
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(10, 500, (2, 10), generator=g)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, :4] = 0  # left padding: positions 1,1,1,1,0,1,... must not be read as a packing
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    pos[1, :4] = 1
    for rows in (slice(0, 2), slice(1, 2)):
        a, ga = _logits_and_grads(tiny_models[NAME], ids[rows], pos[rows], mask[rows])
        b, gb = _logits_and_grads(tiny_models["sdpa"], ids[rows], pos[rows], mask[rows])
        assert torch.equal(a, b) and torch.equal(ga, gb)
    # decoding with a cache: sdpa's path too
    for impl in (NAME, "sdpa"):
        out = tiny_models[impl].generate(ids[:1], max_new_tokens=4, do_sample=False)
        assert out.shape == (1, 14)
    assert torch.equal(
        tiny_models[NAME].generate(ids[:1], max_new_tokens=4, do_sample=False),
        tiny_models["sdpa"].generate(ids[:1], max_new_tokens=4, do_sample=False),
    )


def _plain_transformers_loads(folder: Path) -> subprocess.CompletedProcess:
    """Load ``folder`` with transformers alone, in a process that never registered the e2c attention."""
    code = "import sys; from transformers import AutoModelForCausalLM; AutoModelForCausalLM.from_pretrained(sys.argv[1])"
    return subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, check=False
    )


def test_a_saved_checkpoint_loads_without_the_plugin_once_made_plain_cpu(
    tiny_path: str, tmp_path: Path
) -> None:
    from e2c.rl.launch import plain_checkpoint
    from e2c.verl_cpu import plain_attention_config

    # what verl writes: the config it trained with, the attention override included
    step = tmp_path / "global_step_3"
    hf = step / "actor" / "huggingface"
    shutil.copytree(tiny_path, hf)
    config = json.loads((hf / "config.json").read_text())
    (hf / "config.json").write_text(json.dumps({**config, "attn_implementation": NAME}))
    refused = _plain_transformers_loads(hf)
    assert refused.returncode != 0 and NAME in refused.stderr

    assert plain_checkpoint(step) == 0  # no LoRA adapter to merge
    assert json.loads((hf / "config.json").read_text()) == config
    loaded = _plain_transformers_loads(hf)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert plain_attention_config(hf) is False  # already plain


def test_plain_attention_config_leaves_other_configs_alone_cpu(tmp_path: Path) -> None:
    from e2c.verl_cpu import plain_attention_config

    assert plain_attention_config(tmp_path) is False  # no config.json
    cases = {
        "flash": json.dumps({"attn_implementation": "flash_attention_2", "x": 1}),
        "none": json.dumps({"x": 1}),
        "broken": '{"attn_implementation": "sdpa_varlen"',
        "list": json.dumps([NAME]),
    }
    for name, text in cases.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(text)
        assert plain_attention_config(tmp_path / name) is False
        assert (tmp_path / name / "config.json").read_text() == text
