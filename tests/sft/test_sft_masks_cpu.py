"""The exploration-only loss mask: vectorised vs a plain loop, and its alignment with verl's SFT loss."""

from __future__ import annotations

import random

import pytest
import torch
from reference_impls import exploration_loss_mask_reference

from e2c.sft.masks import (
    boundary_token_id,
    exploration_loss_mask,
    scope_loss_mask,
)

B = 9  # the boundary id in the hand-made rows

# (input_ids, loss_mask, expected) -- prompt tokens have mask 0, assistant tokens 1.
CASES = {
    "tag in the middle": ([1, 2, 3, 4, B, 5, 6], [0, 0, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0, 0]),
    "tag at the end": ([1, 2, 3, B], [0, 1, 1, 1], [0, 1, 1, 1]),
    "tag first assistant token": ([1, B, 3], [0, 1, 1], [0, 1, 0]),
    "no tag": ([1, 2, 3, 4], [0, 1, 1, 1], [0, 0, 0, 0]),
    "truncated before the tag": ([1, 2, 3], [0, 1, 1], [0, 0, 0]),
    "tag only in the prompt": ([B, 2, 3, 4], [0, 1, 1, 1], [0, 0, 0, 0]),
    "tag in prompt and answer": ([B, 2, 3, B, 4], [0, 0, 1, 1, 1], [0, 0, 1, 1, 0]),
    "two tags: the first ends it": ([1, 2, B, 3, B, 4], [0, 1, 1, 1, 1, 1], [0, 1, 1, 0, 0, 0]),
    "padding after the row": ([1, 2, B, 0, 0], [0, 1, 1, 0, 0], [0, 1, 1, 0, 0]),
    "second turn after a masked turn": ([1, 2, 7, 3, B, 5], [0, 1, 0, 1, 1, 1], [0, 1, 0, 1, 1, 0]),
    "empty row": ([], [], []),
}


@pytest.mark.parametrize("name", list(CASES))
def test_hand_cases(name: str) -> None:
    ids, mask, want = CASES[name]
    assert exploration_loss_mask_reference(ids, mask, B) == want
    got = exploration_loss_mask(torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long), B)
    assert got.dtype == torch.long and got.tolist() == want


def test_vectorised_matches_reference_on_random_rows_and_batches() -> None:
    rng = random.Random(0)
    rows = []
    for _ in range(300):
        n = rng.randint(1, 40)
        p = rng.randint(0, n)  # prompt length
        ids = [rng.choice([1, 2, 3, B]) if rng.random() < 0.3 else rng.randint(0, 12) for _ in range(n)]
        mask = [0] * p + [1] * (n - p)
        if rng.random() < 0.2 and n - p > 2:  # a masked middle turn
            mask[p + 1] = 0
        rows.append((ids, mask))
        got = exploration_loss_mask(torch.tensor(ids), torch.tensor(mask), B).tolist()
        assert got == exploration_loss_mask_reference(ids, mask, B), (ids, mask)
    # A padded (batch, time) tensor gives the same rows.
    width = max(len(i) for i, _ in rows)
    ids_b = torch.tensor([i + [0] * (width - len(i)) for i, _ in rows])
    mask_b = torch.tensor([m + [0] * (width - len(m)) for _, m in rows])
    got_b = exploration_loss_mask(ids_b, mask_b, B)
    for k, (ids, mask) in enumerate(rows):
        assert got_b[k, : len(ids)].tolist() == exploration_loss_mask_reference(ids, mask, B)
        assert got_b[k, len(ids) :].sum() == 0


def test_scope_dispatch() -> None:
    ids, mask = torch.tensor([1, 2, B, 3]), torch.tensor([0, 1, 1, 1])
    assert scope_loss_mask(ids, mask, "full", B) is mask
    assert scope_loss_mask(ids, mask, "exploration", B).tolist() == [0, 1, 1, 0]
    with pytest.raises(ValueError, match="unknown loss_scope 'half'; valid: full, exploration"):
        scope_loss_mask(ids, mask, "half", B)


def test_boundary_token_id_from_the_tokenizer(tiny_tok) -> None:
    bid = boundary_token_id(tiny_tok, "</EXPLORATION>")
    assert tiny_tok.convert_ids_to_tokens(bid) == "</EXPLORATION>"
    with pytest.raises(ValueError, match="not a single token"):
        boundary_token_id(tiny_tok, "EXECUTION PHASE:")


def test_mask_alignment_with_verls_sft_loss(tiny_tok) -> None:
    """verl's sft_loss multiplies log-prob[i] (which scores token i+1) by the mask rolled left by one, so
    the mask must sit on the label token itself. Feed it log-probs that encode which label they score and
    check that exactly the intended labels (the exploration, through </EXPLORATION>) are averaged."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.losses import sft_loss

    bid = boundary_token_id(tiny_tok, "</EXPLORATION>")
    chat = [
        {"role": "user", "content": "What is 2 + 3?"},
        {
            "role": "assistant",
            "content": "<EXPLORATION>add them</EXPLORATION><EXECUTION>2 + 3 = 5</EXECUTION>",
        },
    ]
    rows = []
    for text in (chat, [chat[0], {"role": "assistant", "content": "<EXPLORATION>plan</EXPLORATION>"}]):
        ids = torch.tensor(tiny_tok.apply_chat_template(text, tokenize=True, return_dict=True)["input_ids"])
        n_prompt = len(
            tiny_tok.apply_chat_template(
                text[:1], tokenize=True, add_generation_prompt=True, return_dict=True
            )["input_ids"]
        )
        mask = torch.zeros_like(ids)
        mask[n_prompt:] = 1  # verl's assistant mask: everything after the generation prompt
        rows.append((ids, exploration_loss_mask(ids, mask, bid)))
    # log_prob[i] = -(id of token i+1): the loss then is the mean id of the labels it counts.
    logp = [-torch.roll(ids, -1).float() for ids, _ in rows]
    data = TensorDict(
        {"loss_mask": torch.nested.as_nested_tensor([m for _, m in rows], layout=torch.jagged)},
        batch_size=[2],
    )
    # What verl's engine adds before calling the loss (FSDPEngine.forward_backward_batch).
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=int(sum(m.sum() for _, m in rows)))
    out = {"log_probs": torch.nested.as_nested_tensor(logp, layout=torch.jagged)}
    loss, _ = sft_loss(None, out, data)
    labels = torch.cat([ids[m.bool()] for ids, m in rows]).float()
    assert loss.item() == pytest.approx(labels.mean().item())
    # ...and those labels are the assistant text from <EXPLORATION> through </EXPLORATION>, nothing else.
    for ids, m in rows:
        trained = ids[m.bool()].tolist()
        assert tiny_tok.decode(trained).startswith("<EXPLORATION>") and trained[-1] == bid
        assert tiny_tok.eos_token_id not in trained
