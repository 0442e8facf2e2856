"""Loss masks for E2C SFT rows, on token ids.

verl's ``loss_mask`` is aligned to the token itself, not to the position that predicts it (``sft_loss`` rolls
it left by one): ``loss_mask[j] == 1`` means token ``j`` is a label, so training on the closing exploration tag
sets its own position. A ``full`` row keeps verl's mask. An ``exploration`` row keeps it up to and including
the first boundary token among the trained tokens (a tag quoted in the prompt does not count), and nothing
after it, not even the end of turn, so the model does not learn to stop after its plan.
More: docs/training.md, "SFT and EF-SFT".
"""

from __future__ import annotations

from typing import Any

from e2c.chain import exploration_token_mask

SCOPES = ("full", "exploration")


def exploration_loss_mask(input_ids: Any, loss_mask: Any, boundary_id: int) -> Any:
    """Restrict a loss mask to the exploration: trained tokens up to and including the first boundary.

    Args:
        input_ids: token ids, a 1-D or 2-D (batch, time) torch tensor.
        loss_mask: verl's loss mask of the same shape (1 = token is a label, aligned to the token itself).
        boundary_id: id of the token that ends the exploration (look it up from the tokenizer, e.g.
            :func:`boundary_token_id`).

    Returns:
        A mask of ``loss_mask``'s shape and dtype. A row whose trained tokens contain no boundary (no tag,
        or the tag cut off by truncation) gets an all-zero mask: an exploration without its end is not a
        training target, the same rule as :func:`e2c.chain.exploration_token_mask`.
    """
    import torch

    trained = loss_mask != 0
    # Only trained (assistant) positions may hold the boundary: a tag in the prompt is not the end of
    # this row's exploration. -1 is never a token id.
    ids = torch.where(trained, input_ids, torch.full_like(input_ids, -1))
    keep = exploration_token_mask(ids, boundary_id, trained)
    return loss_mask * keep.to(loss_mask.dtype)


def scope_loss_mask(input_ids: Any, loss_mask: Any, scope: str, boundary_id: int) -> Any:
    """The loss mask of one row for its ``loss_scope`` (``full``: unchanged; ``exploration``: see
    :func:`exploration_loss_mask`). An unknown scope raises ``ValueError`` naming the valid ones."""
    if scope == "full":
        return loss_mask
    if scope == "exploration":
        return exploration_loss_mask(input_ids, loss_mask, boundary_id)
    raise ValueError(f"unknown loss_scope {scope!r}; valid: {', '.join(SCOPES)}")


def boundary_token_id(tokenizer: Any, boundary: str) -> int:
    """The single token id of the exploration boundary tag; ``ValueError`` if the tokenizer splits it
    (add the tags with :func:`e2c.core.models.ensure_chain_tokens`)."""
    ids = tokenizer.encode(boundary, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(
            f"the exploration boundary {boundary!r} is not a single token of this tokenizer ({len(ids)} ids); "
            "add the chain tokens with e2c.core.models.ensure_chain_tokens (the SFT scripts do this)"
        )
    return int(ids[0])
