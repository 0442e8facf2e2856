"""Exploration-token advantage weighting (E2C) and per-segment statistics: pure tensor functions.

After GRPO (or DAPO) normalisation every response token carries its sequence's advantage. E2C multiplies the
advantages of the *exploration* tokens (up to and including the first ``</EXPLORATION>``) by a coefficient
(1.0 in stage 1, 2.0 in stage 2), so that the plan, which decides the execution, gets a stronger signal.

Departure from the paper's code: there, a response with no closing tag gets the exploration weight on every
token, which rewards untagged responses in stage 2 whenever their advantage is positive. Here such a response
keeps weight 1.0 everywhere and is counted (``untagged``) so the share can be watched.
"""

from __future__ import annotations

from typing import Any

from e2c.chain import exploration_token_mask


def exploration_weights(
    responses: Any, response_mask: Any, boundary_id: int, coef: float, execute_coef: float = 1.0
) -> tuple[Any, Any]:
    """Per-token advantage weights and the exploration mask.

    Args:
        responses: (B, T) response token ids (padding anywhere after the response is fine).
        response_mask: (B, T) 1 for trained response tokens; 0 on padding and on tokens the policy did not
            sample (an elastic budget's forced boundary, which still ends the exploration span).
        boundary_id: token id that closes the exploration.
        coef: weight of exploration tokens.
        execute_coef: weight of the other response tokens (1.0 in the paper).

    Returns:
        (weights, explore_mask): float (B, T) weights (0 on padding) and the boolean exploration mask.
    """
    import torch

    valid = response_mask.bool()
    explore = exploration_token_mask(responses, boundary_id, valid)
    weights = torch.where(explore, float(coef), float(execute_coef))
    return weights * valid.float(), explore


def weight_advantages(
    advantages: Any,
    responses: Any,
    response_mask: Any,
    boundary_id: int,
    coef: float,
    execute_coef: float = 1.0,
) -> tuple[Any, Any]:
    """``advantages`` with exploration tokens scaled by ``coef`` (see :func:`exploration_weights`).

    Returns ``(weighted, explore_mask)``. Row 0 closes its exploration with the boundary (id 7): its first
    three tokens are doubled, the execution after them is not. Row 1 has no boundary: weight 1.0 throughout.
    Padding (mask 0) gets 0.

    >>> import torch
    >>> adv = torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5, 0.5]])
    >>> ids = torch.tensor([[3, 4, 7, 5, 6], [3, 4, 5, 0, 0]])
    >>> mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    >>> weighted, explore = weight_advantages(adv, ids, mask, boundary_id=7, coef=2.0)
    >>> weighted.tolist()
    [[2.0, 2.0, 2.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.0, 0.0]]
    >>> explore.tolist()
    [[True, True, True, False, False], [False, False, False, False, False]]
    """
    weights, explore = exploration_weights(responses, response_mask, boundary_id, coef, execute_coef)
    return advantages * weights.to(advantages.dtype), explore


def positive_only_mask(advantages: Any, response_mask: Any) -> Any:
    """e3's ``only_train_on_positive``: ``response_mask`` with every token of a negative response removed.

    A response is negative when the mean of its advantages over ``response_mask`` is below zero (GRPO gives
    every token of a response the same advantage). Zero-advantage responses (an all-equal group) stay: the
    switch removes negative gradients only. Removing the tokens from the mask, not only zeroing their
    advantages, is what takes them out of the loss: verl aggregates the policy, entropy and KL terms over the
    mask and divides token-mean by its sum, so zeroed-but-masked tokens would still dilute the mean and still
    receive entropy and KL gradients. Same dtype and shape as ``response_mask``.
    """
    mask = response_mask.to(advantages.dtype)
    seq_adv = (advantages * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    return response_mask * (seq_adv >= 0).to(response_mask.dtype)[:, None]


def segment_stats(
    responses: Any, response_mask: Any, boundary_id: int, close_id: int | None = None, explore: Any = None
) -> dict[str, float]:
    """Batch statistics of the chain segments: mean exploration and execution tokens, the share of responses
    with no exploration boundary (``untagged``), and the share with the boundary and, when ``close_id`` is
    given, a closing execution tag after it (``well_formed``). ``explore`` is the exploration mask if the
    caller already has it (from :func:`weight_advantages`)."""
    valid = response_mask.bool()
    if explore is None:
        explore = exploration_token_mask(responses, boundary_id, valid)
    n_explore = explore.sum(-1).float()
    n_total = valid.sum(-1).float()
    # Padding is never the boundary; a masked (forced) boundary still closes the exploration.
    tagged = (responses == boundary_id).any(-1)
    out = {
        "explore_tokens_mean": float(n_explore[tagged].mean()) if bool(tagged.any()) else 0.0,
        "execute_tokens_mean": float((n_total - n_explore)[tagged].mean()) if bool(tagged.any()) else 0.0,
        "untagged_share": float((~tagged).float().mean()),
        "explore_token_share": float(n_explore.sum() / n_total.sum().clamp(min=1)),
    }
    if close_id is not None:
        after = valid & ~explore & tagged[:, None]
        closed = ((responses == close_id) & after).any(-1)
        out["well_formed_share"] = float((tagged & closed).float().mean())
    return out


def segment_mean(values: Any, mask: Any) -> float:
    """Mean of ``values`` over ``mask`` (0.0 for an empty mask); e.g. entropy per segment."""
    m = mask.float()
    return float((values.float() * m).sum() / m.sum().clamp(min=1))
