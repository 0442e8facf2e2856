"""E2CSFTDataset on the tiny model's tokenizer: loss scopes, over-long rows, the trained-token share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from e2c.chain import E2C
from e2c.data.io import write_parquet
from e2c.sft.dataset import E2CSFTDataset, EFSFTDataset

PLAN = "1. add the numbers\n2. report the sum"
EXEC = "Step 1: 2 + 3 = 5\nSo the answer is \\boxed{5}"
FULL = E2C.format_response(PLAN, EXEC)
EXPLORE = f"{E2C.explore_open}{PLAN}{E2C.explore_close}"


def _row(content: str, scope: str | None = None, question: str = "What is 2 + 3?", **extra) -> dict:
    row = {
        "messages": [*E2C.messages(question), {"role": "assistant", "content": content}],
        "data_source": "t",
        "extra_info": {"id": question, **extra},
    }
    if scope is not None:
        row["loss_scope"] = scope
    return row


def _ds(path: Path, tok, cls=E2CSFTDataset, **cfg):
    return cls(str(path), tok, OmegaConf.create({"pad_mode": "no_padding", "max_length": 4096, **cfg}))


def _trained_text(tok, item: dict) -> str:
    return tok.decode(item["input_ids"][item["loss_mask"].bool()])


def test_scopes_mask_the_right_tokens(tmp_path: Path, tiny_tok) -> None:
    p = write_parquet(
        [_row(FULL, "full"), _row(FULL, "exploration"), _row(EXPLORE, "exploration")], tmp_path / "ef.parquet"
    )
    ds = _ds(p, tiny_tok)
    full, cut, plan_only = ds[0], ds[1], ds[2]
    # A full row trains the whole assistant turn, end-of-turn included (verl's own mask).
    assert _trained_text(tiny_tok, full) == FULL + tiny_tok.eos_token + "\n"
    # Exploration rows: from <EXPLORATION> through </EXPLORATION>, nothing after it, not even <|im_end|>.
    assert _trained_text(tiny_tok, cut) == EXPLORE
    assert _trained_text(tiny_tok, plan_only) == EXPLORE
    close_id = tiny_tok.convert_tokens_to_ids(E2C.explore_close)
    last = int(cut["loss_mask"].nonzero().max())
    assert int(cut["input_ids"][last]) == close_id and int(cut["loss_mask"][last + 1 :].sum()) == 0
    # The input is unchanged: the execution is still seen as context for full rows, only the mask differs.
    assert torch.equal(full["input_ids"], cut["input_ids"])


def test_masks_equal_verls_for_full_rows_and_the_share_is_counted(tmp_path: Path, tiny_tok) -> None:
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    rows = [
        _row(FULL, "full"),
        _row(FULL, "exploration"),
        _row(FULL, "exploration", question="What is 7 * 8?"),
    ]
    p = write_parquet(rows, tmp_path / "mix.parquet")
    ds = _ds(p, tiny_tok, stats_path=str(tmp_path / "stats.json"))
    plain = MultiTurnSFTDataset(
        str(p), tiny_tok, OmegaConf.create({"pad_mode": "no_padding", "max_length": 4096})
    )
    assistant = trained = 0
    for i in range(len(rows)):
        ours, base = ds[i], plain[i]
        assert torch.equal(ours["input_ids"], base["input_ids"])
        assert bool(((ours["loss_mask"] == 1) <= (base["loss_mask"] == 1)).all())  # a subset of verl's mask
        if rows[i]["loss_scope"] == "full":
            assert torch.equal(ours["loss_mask"], base["loss_mask"])
        assistant += int(base["loss_mask"].sum())
        trained += int(ours["loss_mask"].sum())
    st = ds.stats
    assert (st.assistant_tokens, st.trained_tokens) == (assistant, trained)
    assert st.rows_by_scope == {"full": 1, "exploration": 2}
    assert 0.3 < st.trained_share < 1.0 and st.trained_share == pytest.approx(trained / assistant)
    saved = json.loads((tmp_path / "stats.json").read_text())[str(p)]
    assert saved["trained_tokens"] == trained and saved["trained_share"] == pytest.approx(trained / assistant)


def test_scope_sources_and_defaults(tmp_path: Path, tiny_tok) -> None:
    # No loss_scope column: extra_info.loss_scope, else the class default.
    p = write_parquet([_row(FULL, loss_scope="exploration"), _row(FULL)], tmp_path / "noscope.parquet")
    assert _ds(p, tiny_tok).loss_scopes == ["exploration", "full"]
    assert _ds(p, tiny_tok, cls=EFSFTDataset).loss_scopes == ["exploration", "exploration"]
    assert _ds(p, tiny_tok, default_loss_scope="exploration").loss_scopes == ["exploration", "exploration"]
    bad = write_parquet([_row(FULL, "half")], tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad\.parquet row 0: loss_scope='half'; valid: full, exploration"):
        _ds(bad, tiny_tok)
    with pytest.raises(ValueError, match=r"data\.overlong='cut'"):
        _ds(p, tiny_tok, overlong="cut")


def test_overlong_rows_skip_error_truncate(tmp_path: Path, tiny_tok) -> None:
    long_exec = " ".join(f"Step {i}: {i} + {i} = {2 * i}." for i in range(60))
    rows = [
        _row(FULL, "full"),
        _row(E2C.format_response(PLAN, long_exec), "full"),
        _row(E2C.format_response(PLAN * 30, EXEC), "exploration"),
    ]
    p = write_parquet(rows, tmp_path / "long.parquet")
    lengths = [
        len(tiny_tok.apply_chat_template(r["messages"], tokenize=True, return_dict=True)["input_ids"])
        for r in rows
    ]
    limit = lengths[0] + 5
    assert min(lengths[1:]) > limit
    skip = _ds(p, tiny_tok, max_length=limit)
    assert len(skip) == 1 and skip.stats.skipped_overlong == 2 and skip.stats.seq_len_max == max(lengths)
    assert _trained_text(tiny_tok, skip[0]).startswith(E2C.explore_open)
    with pytest.raises(ValueError, match=rf"row 1 has {lengths[1]} tokens > data.max_length={limit}"):
        _ds(p, tiny_tok, max_length=limit, overlong="error")
    cut = _ds(p, tiny_tok, max_length=limit, overlong="truncate")
    assert len(cut) == 3 and cut.stats.truncated == 2
    assert all(int(cut[i]["input_ids"].shape[0]) == limit for i in (1, 2))
    # The exploration row lost its closing tag to truncation: it trains nothing, and says so.
    assert int(cut[2]["loss_mask"].sum()) == 0 and cut.stats.exploration_rows_without_boundary == 1
    with pytest.raises(ValueError, match=r"every row is longer than data\.max_length=4"):
        _ds(p, tiny_tok, max_length=4)


def test_a_tokenizer_without_the_tags_is_refused(tmp_path: Path) -> None:
    from e2c.chain import THINK
    from e2c.core.models import build_tiny_tokenizer

    tok = build_tiny_tokenizer(THINK)  # the tiny vocabulary without the E2C tags
    p = write_parquet([_row(FULL, "full")], tmp_path / "x.parquet")
    with pytest.raises(ValueError, match="'</EXPLORATION>' is not a single token"):
        _ds(p, tok)
