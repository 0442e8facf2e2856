"""Plain-loop reference implementations of the package's vectorised functions, for the tests only: each
is the definition written out step by step, so a test can compare the fast version with it on many inputs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path


def exploration_token_mask_reference(
    token_ids: Sequence[int], boundary_id: int, valid_mask: Sequence[int] | None = None
) -> list[bool]:
    """Plain-loop reference for :func:`e2c.chain.exploration_token_mask` on one row (used by tests)."""
    if boundary_id not in token_ids:
        return [False] * len(token_ids)
    out, inside = [], True
    for i, t in enumerate(token_ids):
        valid = valid_mask is None or bool(valid_mask[i])
        out.append(inside and valid)
        if t == boundary_id:
            inside = False
    return out


def pass_at_k_reference(n: int, c: int, k: int) -> float:
    """pass@k straight from its definition with binomials (for tests)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def weight_advantages_reference(
    advantages: list[list[float]],
    responses: list[list[int]],
    response_mask: list[list[int]],
    boundary_id: int,
    coef: float,
    execute_coef: float = 1.0,
) -> list[list[float]]:
    """Plain-loop reference for :func:`e2c.rl.advantage.weight_advantages` (used by tests)."""
    out = []
    for adv, ids, mask in zip(advantages, responses, response_mask, strict=True):
        # A boundary with mask 0 (forced by an elastic budget) still ends the sampled exploration.
        tagged = boundary_id in ids
        row, inside = [], tagged
        for a, t, m in zip(adv, ids, mask, strict=True):
            row.append(a * (coef if inside else execute_coef) if m else 0.0)
            if t == boundary_id:
                inside = False
        out.append(row)
    return out


def positive_only_mask_reference(
    advantages: list[list[float]], response_mask: list[list[int]]
) -> list[list[int]]:
    """Plain-loop reference for :func:`e2c.rl.advantage.positive_only_mask` (used by tests)."""
    out = []
    for adv, mask in zip(advantages, response_mask, strict=True):
        n = sum(mask)
        mean = sum(a for a, m in zip(adv, mask, strict=True) if m) / n if n else 0.0
        out.append([m if mean >= 0 else 0 for m in mask])
    return out


def exploration_loss_mask_reference(
    input_ids: Sequence[int], loss_mask: Sequence[int], boundary_id: int
) -> list[int]:
    """Plain-loop reference for :func:`e2c.sft.masks.exploration_loss_mask` on one row (used by the tests)."""
    if not any(t == boundary_id and m for t, m in zip(input_ids, loss_mask)):
        return [0] * len(input_ids)
    out, before_end = [], True
    for t, m in zip(input_ids, loss_mask):
        out.append(int(m) if before_end else 0)
        if m and t == boundary_id:
            before_end = False
    return out


def tensorboard_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """``{tag: {step: value}}`` of every tensorboard event file under ``folder`` (read back with
    tensorboard's own reader, as the tensorboard UI reads them)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, dict[int, float]] = {}
    for events in sorted(Path(folder).rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, {}).update({e.step: e.value for e in acc.Scalars(tag)})
    return out


def tensorboard_texts(folder: Path) -> dict[str, dict[int, str]]:
    """``{tag: {step: text}}`` of the text summaries (``add_text``) under ``folder``, read as the UI reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, dict[int, str]] = {}
    for events in sorted(Path(folder).rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"tensors": 0})
        acc.Reload()
        for tag in acc.Tags()["tensors"]:
            for e in acc.Tensors(tag):
                if e.tensor_proto.string_val:
                    # add_text("x", ...) is stored as the tensor "x/text_summary"
                    name = tag.removesuffix("/text_summary")
                    out.setdefault(name, {})[e.step] = b"".join(e.tensor_proto.string_val).decode("utf-8")
    return out
