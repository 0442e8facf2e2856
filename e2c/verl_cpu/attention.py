"""Causal attention one sequence at a time for packed rows: the ``sdpa_varlen`` attention of transformers.

verl trains without padding by packing a micro-batch into one row whose position ids restart at 0 at each
sequence; with ``sdpa`` on a CPU that becomes a block-diagonal mask whose every score PyTorch computes.
:func:`sdpa_varlen_forward` splits such a row at its boundaries and runs ``scaled_dot_product_attention`` with
``is_causal=True`` on each sequence: the same scores and softmax, summed in another order. Anything else (a
padded batch, one sequence, decoding with a cache, positions that do not restart at 0) goes to transformers'
own ``sdpa`` with the same mask. Registered as :data:`NAME` by :func:`register` (the verl plugin, in every
process); nothing here is CPU-only, but on a GPU flash attention is the better choice.
More: docs/training.md, "Speed on a CPU".
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

NAME = "sdpa_varlen"


def packed_bounds(position_ids: torch.Tensor) -> list[int] | None:
    """The boundaries ``[0, s1, ..., n]`` of the sequences packed in one row, read from position ids that
    restart at 0 at each sequence; None when the row is one sequence or its positions do not restart at 0
    (left padding's repeated positions, an offset start): then the row must not be split.

    >>> packed_bounds(torch.tensor([[0, 1, 2, 0, 1, 0]]))
    [0, 3, 5, 6]
    >>> packed_bounds(torch.tensor([[0, 1, 2]])) is None, packed_bounds(torch.tensor([[1, 1, 0, 1]])) is None
    (True, True)
    """
    pos = position_ids.reshape(-1, position_ids.shape[-1])[0]  # 3-row mrope positions: the first row
    if pos.numel() < 2 or int(pos[0]) != 0:
        return None
    starts = torch.nonzero(pos[1:] != pos[:-1] + 1).flatten() + 1
    if starts.numel() == 0 or bool((pos[starts] != 0).any()):
        return None
    return [0, *starts.tolist(), pos.numel()]


def sdpa_varlen_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature (query, key, value ``[batch, heads, tokens, head_dim]``; returns
    ``[batch, tokens, heads, head_dim]``): a packed row of a causal module attends within each sequence;
    everything else is transformers' ``sdpa``."""
    position_ids = kwargs.get("position_ids")
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    bounds = None
    if (
        causal
        and position_ids is not None
        and query.shape[0] == 1
        and query.shape[2] == key.shape[2] == position_ids.shape[-1]
    ):
        bounds = packed_bounds(position_ids)
    if bounds is None:
        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=is_causal,
            **kwargs,
        )
    gqa = query.shape[1] != key.shape[1]
    parts = [
        F.scaled_dot_product_attention(
            query[:, :, a:b],
            key[:, :, a:b],
            value[:, :, a:b],
            dropout_p=dropout,
            scale=scaling,
            is_causal=True,
            enable_gqa=gqa,
        )
        for a, b in pairwise(bounds)
    ]
    return torch.cat(parts, dim=2).transpose(1, 2).contiguous(), None


def register() -> list[str]:
    """Register :data:`NAME` in transformers' attention and mask registries (idempotent)."""
    AttentionInterface.register(NAME, sdpa_varlen_forward)
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    return [f"attention:{NAME}"]
