"""Continuous batching in the transformers decode loop (:func:`e2c.generation.hf.decode_rows`): rows that
finish are replaced by queued prompts mid-decode, and nothing a row generates depends on whether it shared
the batch, joined late or ran alone (greedy tokens and log-probabilities against one prompt at a time)."""

from __future__ import annotations

from typing import Any

import pytest

from e2c.generation import hf as hf_mod
from e2c.generation.hf import decode_rows, left_pad, mergeable


class CountingModel:
    """The model, recording (rows, is a prefill, attended width) of every forward call."""

    def __init__(self, model: Any) -> None:
        self.model, self.calls = model, []
        self.device = model.device

    def __call__(self, **kw: Any) -> Any:
        ids, mask = kw["input_ids"], kw["attention_mask"]
        self.calls.append((ids.shape[0], kw.get("past_key_values") is None, mask.shape[1]))
        return self.model(**kw)


@pytest.fixture(scope="module")
def tiny(tiny_path: str):
    from e2c.core.models import load_model_and_tokenizer

    model, tok, _ = load_model_and_tokenizer(tiny_path, None, dtype="float32")
    return model.eval(), tok


def prompts_of(tok: Any) -> list[list[int]]:
    texts = [
        "A much longer prompt about plans and steps and what comes after them",
        "What is 2+3? Let me think",
        "x",
        "Hello there",
        "Seven plus eight is",
        "The plan: first add, then check",
    ]
    return [tok.encode(t, add_special_tokens=False) for t in texts]


def alone(model: Any, pad: int, prompts: list[list[int]], limits: list[int], n: int = 1, **kw: Any):
    """Reference: each prompt decoded by itself."""
    rows, lps = [], []
    for p, m in zip(prompts, limits, strict=True):
        r, lp = decode_rows(model, pad, [p], n=n, max_tokens=[m], temperature=0.0, logprobs=True, **kw)
        rows += r
        lps += lp
    return rows, lps


def test_finished_rows_are_refilled_and_tokens_match_one_at_a_time(tiny) -> None:
    import torch

    model, tok = tiny
    prompts = prompts_of(tok)
    limits = [3, 9, 2, 7, 5, 4]  # rows end at different steps, so slots free up mid-decode
    counting = CountingModel(model)
    rows, lps = decode_rows(
        counting,
        tok.pad_token_id,
        prompts,
        max_tokens=limits,
        temperature=0.0,
        logprobs=True,
        batch_size=2,
    )
    ref_rows, ref_lps = alone(model, tok.pad_token_id, prompts, limits)
    assert rows == ref_rows
    assert [len(r) for r in rows] == limits
    for a, b in zip(lps, ref_lps, strict=True):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-4)
    assert max(c[0] for c in counting.calls) <= 2
    # A prompt was prefilled after decoding had started: the freed slot was refilled, not left idle.
    first_step = next(i for i, c in enumerate(counting.calls) if not c[1])
    assert any(c[1] for c in counting.calls[first_step:])


def test_samples_share_the_prompt_and_join_as_a_whole(tiny) -> None:
    model, tok = tiny
    prompts = prompts_of(tok)[:4]
    limits = [4, 6, 3, 5]
    counting = CountingModel(model)
    rows, _ = decode_rows(
        counting, tok.pad_token_id, prompts, n=3, max_tokens=limits, temperature=0.0, batch_size=4
    )
    ref_rows, _ = alone(model, tok.pad_token_id, prompts, limits, n=3)
    assert rows == ref_rows
    # Each prefill encodes whole prompts once (never a prompt per sample), and at most 4 rows run at once.
    prefills = [c for c in counting.calls if c[1]]
    assert sum(c[0] for c in prefills) == len(prompts)
    assert max(c[0] for c in counting.calls) <= 4


def test_dead_left_padding_is_cut_when_long_rows_leave(tiny) -> None:
    model, tok = tiny
    long = tok.encode("word " * 40, add_special_tokens=False)
    short = tok.encode("hi", add_special_tokens=False)
    counting = CountingModel(model)
    rows, _ = decode_rows(
        counting, tok.pad_token_id, [long, short], max_tokens=[1, 8], temperature=0.0, batch_size=2
    )
    assert [len(r) for r in rows] == [1, 8]
    # After the long row ends the short row attends over its own tokens only, not the long prompt's width.
    last_width = counting.calls[-1][2]
    assert last_width == len(short) + 7


def test_unmergeable_caches_fall_back_to_whole_batches(tiny, monkeypatch) -> None:
    model, tok = tiny
    prompts = prompts_of(tok)
    limits = [3, 9, 2, 7, 5, 4]
    monkeypatch.setattr(hf_mod, "mergeable", lambda cache: False)
    counting = CountingModel(model)
    rows, _ = decode_rows(
        counting, tok.pad_token_id, prompts, max_tokens=limits, temperature=0.0, batch_size=2
    )
    monkeypatch.undo()
    assert rows == alone(model, tok.pad_token_id, prompts, limits)[0]
    # A prefill happens only once the previous batch has fully ended: 3 batches of 2 prompts.
    assert [c[0] for c in counting.calls if c[1]] == [2, 2, 2]


def test_seeded_sampling_repeats_with_refills(tiny) -> None:
    import torch

    model, tok = tiny
    prompts = prompts_of(tok)

    def run() -> list[list[int]]:
        torch.manual_seed(7)
        return decode_rows(
            model, tok.pad_token_id, prompts, n=2, max_tokens=[5, 8, 3, 6, 4, 7], batch_size=4
        )[0]

    assert run() == run()


def test_left_pad_and_mergeable_helpers(tiny) -> None:
    import torch

    t = torch.ones(2, 3)
    padded = left_pad(t, 5, -1)
    assert padded.shape == (2, 5) and padded[:, :2].sum() == 0 and padded[:, 2:].sum() == 6
    assert left_pad(t, 3, -1) is t
    model, tok = tiny
    out = model(input_ids=torch.tensor([tok.encode("hi", add_special_tokens=False)]), use_cache=True)
    assert mergeable(out.past_key_values)
    assert not mergeable(None)
