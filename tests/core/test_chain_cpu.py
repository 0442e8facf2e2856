"""The chain format: prompts, parsing (malformed output included), token masks on real tokenizers."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_impls import exploration_token_mask_reference

from e2c.chain import (
    E2C,
    PLAIN,
    THINK,
    ChainFormat,
    char_span_token_mask,
    exploration_token_mask,
    get_format,
    parse_chain,
    phase_char_spans,
    tag_token_ids,
)
from e2c.chain.parse import STATUSES

GOOD = "I need to make a step-by-step plan.\n1. Add.</EXPLORATION><EXECUTION>Step 1: 2+3=5. \\boxed{5}</EXECUTION>"


def test_default_matches_release() -> None:
    assert E2C.tags == ("<EXPLORATION>", "</EXPLORATION>", "<EXECUTION>", "</EXECUTION>")
    assert E2C.special_tokens and E2C.prefill_assistant
    assert E2C.assistant_prefix() == "<EXPLORATION>"
    assert "boxed" in E2C.user_content("Q?") and E2C.user_content("Q?").startswith("Q?")
    assert E2C.messages("Q?") == [{"role": "user", "content": E2C.user_content("Q?")}]
    assert E2C.stop_strings("explore") == ["</EXPLORATION>"]


@pytest.mark.parametrize("prefilled_text", [GOOD, "<EXPLORATION>" + GOOD, "  <EXPLORATION>" + GOOD])
def test_parse_well_formed(prefilled_text: str) -> None:
    p = E2C.parse(prefilled_text)
    assert p.status == "ok" and p.well_formed
    assert p.exploration.startswith("I need to make") and p.exploration.endswith("1. Add.")
    assert p.execution == "Step 1: 2+3=5. \\boxed{5}"
    assert p.text[p.explore_end - len("</EXPLORATION>") : p.explore_end] == "</EXPLORATION>"


@pytest.mark.parametrize(
    ("response", "status"),
    [
        ("just some text with \\boxed{3}", "truncated_exploration"),
        ("plan that never ends", "truncated_exploration"),
        ("plan</EXPLORATION>", "missing_execution"),
        ("plan</EXPLORATION> but no execution tag \\boxed{1}", "missing_execution"),
        ("plan</EXPLORATION><EXECUTION>steps cut off", "truncated_execution"),
        ("plan<EXECUTION>steps \\boxed{1}</EXECUTION>", "missing_explore_close"),
        ("</EXPLORATION><EXECUTION>x</EXECUTION>", "empty_phase"),
        ("plan</EXPLORATION><EXECUTION></EXECUTION>", "empty_phase"),
        ("plan</EXPLORATION><EXECUTION>a</EXECUTION><EXECUTION>b</EXECUTION>", "repeated_tags"),
        ("plan</EXPLORATION>more</EXPLORATION><EXECUTION>a</EXECUTION>", "repeated_tags"),
        ("plan</EXPLORATION><EXECUTION>a</EXECUTION> and more text", "trailing_text"),
        ("", "truncated_exploration"),
    ],
)
def test_parse_malformed(response: str, status: str) -> None:
    p = E2C.parse(response)
    assert p.status == status
    assert not p.well_formed


def test_no_tags_without_prefill() -> None:
    p = E2C.parse("no tags at all", prefilled=False)
    assert p.status == "no_tags" and p.answer_region == "no tags at all"


def test_answer_region_is_execution() -> None:
    p = E2C.parse("plan \\boxed{1}</EXPLORATION><EXECUTION>work \\boxed{2}</EXECUTION>")
    assert p.answer_region == "work \\boxed{2}"


def test_format_response_roundtrip() -> None:
    rng = random.Random(0)
    for fmt in (E2C, PLAIN, THINK):
        for _ in range(50):
            expl = " ".join(
                rng.choice(["plan", "1.", "step", "x=2", "\n"]) for _ in range(rng.randint(1, 12))
            )
            exe = " ".join(
                rng.choice(["do", "2.", "y", "\\boxed{4}", "\n"]) for _ in range(rng.randint(1, 12))
            )
            text = fmt.format_response(expl, exe)
            p = fmt.parse(text, prefilled=False)
            assert p.exploration == expl and p.execution == exe, fmt.name


def test_other_formats_are_instances() -> None:
    p = PLAIN.parse(" I plan.\nEXECUTION PHASE: do it \\boxed{1}")
    assert p.exploration == " I plan.\n" and p.execution == " do it \\boxed{1}" and p.status == "ok"
    t = THINK.parse("plan</think>answer \\boxed{2}")
    assert t.exploration == "plan" and t.execution == "answer \\boxed{2}" and t.status == "ok"
    assert THINK.parse("still thinking").status == "truncated_exploration"
    assert get_format("think") is THINK
    with pytest.raises(ValueError, match="valid: e2c, plain, think"):
        get_format("nope")
    with pytest.raises(ValueError, match="cannot both be empty"):
        ChainFormat(name="bad", explore_close="", execute_open="")


def test_prompt_modes() -> None:
    assert E2C.assistant_prefix("execute", "P") == "<EXPLORATION>P</EXPLORATION><EXECUTION>"
    with pytest.raises(ValueError, match="needs the plan"):
        E2C.assistant_prefix("execute")
    with pytest.raises(ValueError, match="valid: full, explore, execute"):
        E2C.assistant_prefix("bogus")  # type: ignore[arg-type]
    assert E2C.messages("Q", system="S")[0] == {"role": "system", "content": "S"}


def test_render_labels() -> None:
    out = E2C.render(GOOD)
    assert out.startswith("EXPLORATION PHASE:\nI need") and "\nEXECUTION PHASE:\nStep 1" in out
    assert "<EXPLORATION>" not in out


# ------------------------------------------------------------------------------------- token masks
def test_mask_vectorised_matches_reference() -> None:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 6, size=(64, 40))
    valid = (rng.random((64, 40)) > 0.1).astype(np.int64)
    ids[::7] = np.where(ids[::7] == 5, 4, ids[::7])  # some rows with no boundary at all
    for backend in (np.asarray, torch.as_tensor):
        got = exploration_token_mask(backend(ids), 5, backend(valid))
        for r in range(ids.shape[0]):
            ref = exploration_token_mask_reference(ids[r].tolist(), 5, valid[r].tolist())
            assert [bool(x) for x in got[r].tolist()] == ref, (backend, r)


def test_mask_untagged_row_is_zero() -> None:
    m = exploration_token_mask(torch.tensor([[1, 2, 3], [1, 9, 3]]), 9)
    assert m.tolist() == [[False, False, False], [True, True, False]]


@pytest.mark.parametrize("tok_name", ["tiny_tok", "embedded_tok"])
def test_masks_on_real_tokenizers(tok_name: str, request: pytest.FixtureRequest) -> None:
    tok = request.getfixturevalue(tok_name)
    ids_by_tag = tag_token_ids(tok, E2C)
    assert len(set(ids_by_tag.values())) == 4
    close_id = ids_by_tag["</EXPLORATION>"]
    ids = tok.encode(GOOD, add_special_tokens=False)
    mask = exploration_token_mask(torch.tensor(ids), close_id).tolist()
    n = sum(mask)
    assert ids[n - 1] == close_id and close_id not in ids[n:]
    assert tok.decode(ids[:n], skip_special_tokens=False) == GOOD[: GOOD.index("</EXPLORATION>") + 14]
    # The character-span route (for formats whose tags are not single tokens) agrees.
    enc = tok(GOOD, add_special_tokens=False, return_offsets_mapping=True)
    spans = phase_char_spans(GOOD)
    assert char_span_token_mask(enc["offset_mapping"], spans["exploration"]) == mask
    # Malformed: no closing tag -> no exploration tokens to weight.
    bad = tok.encode("a plan with no end", add_special_tokens=False)
    assert not exploration_token_mask(torch.tensor(bad), close_id).any()


def test_tag_ids_missing_is_clear() -> None:
    from e2c.core.models import build_tiny_tokenizer

    plain_tok = build_tiny_tokenizer(THINK)  # a tokenizer without the E2C tags
    with pytest.raises(ValueError, match="not a single token"):
        tag_token_ids(plain_tok, E2C)


def test_phase_spans_plain_format() -> None:
    text = "plan here EXECUTION PHASE: do"
    spans = phase_char_spans(text, PLAIN)
    assert text[: spans["exploration"][1]].endswith("EXECUTION PHASE:")
    assert phase_char_spans("no close", E2C) == {"exploration": None, "execution": None}
    assert parse_chain(GOOD).status == "ok"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["<EXPLORATION>", "</EXPLORATION>", "<EXECUTION>", "</EXECUTION>", "plan", " ", "\\boxed{2}"]
        ),
        max_size=12,
    ).map("".join)
)
def test_status_is_always_one_of_the_listed_words_cpu(text: str) -> None:
    """chain_parse.STATUSES lists every status: the RL validation logs and tests check against it."""
    p = parse_chain(text)
    assert p.status in STATUSES and (p.status == "ok") == p.well_formed
