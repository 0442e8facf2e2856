"""Chain phases as tokens: the tags' token ids and the exploration's token mask.

Import these names from :mod:`e2c.chain`, the chain format's public face.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from e2c.chain.tags import ChainTags


def tag_token_ids(tokenizer: Any, fmt: ChainTags) -> dict[str, int]:
    """Look up the token id of every tag of a special-token format.

    Raises ``ValueError`` naming the tag when a tag is not a single token of this tokenizer (use
    :func:`e2c.core.models.ensure_chain_tokens` to add them).
    """
    ids: dict[str, int] = {}
    for tag in fmt.tags:
        enc = tokenizer.encode(tag, add_special_tokens=False)
        if len(enc) != 1:
            raise ValueError(
                f"tag {tag!r} is not a single token of this tokenizer (encodes to {len(enc)} ids); "
                "add the chain tokens with e2c.core.models.ensure_chain_tokens"
            )
        ids[tag] = int(enc[0])
    return ids


def exploration_token_mask(token_ids: Any, boundary_id: int, valid_mask: Any = None) -> Any:
    """Mask of exploration tokens: every token up to and including the first ``boundary_id``.

    Works on a 1-D or 2-D (batch, time) torch tensor or numpy array, without importing either. Rows with
    no boundary token get an all-zero mask: an untagged response is *not* treated as exploration (the
    paper's code scales the whole response in that case, which rewards dropping the tags).

    Args:
        token_ids: response token ids, shape (T,) or (B, T).
        boundary_id: id of the token that ends the exploration (``</EXPLORATION>`` by default).
        valid_mask: optional response mask of the same shape (padding is never exploration).

    Returns:
        A boolean array/tensor of the same shape.
    """
    is_b = token_ids == boundary_id
    counts = is_b.cumsum(-1)
    has_b = counts[..., -1:] > 0
    # No boundary seen yet, or this token is the first boundary.
    mask = ((counts == 0) | (is_b & (counts == 1))) & has_b
    if valid_mask is not None:
        mask = mask & (valid_mask != 0)
    return mask


def char_span_token_mask(offsets: Sequence[tuple[int, int]], span: tuple[int, int] | None) -> list[bool]:
    """Tokens whose character range overlaps ``span`` (half-open). For formats whose tags are not single
    tokens: take the offsets from a fast tokenizer's ``return_offsets_mapping``."""
    if span is None:
        return [False] * len(offsets)
    s, e = span
    return [a < e and b > s and b > a for a, b in offsets]
