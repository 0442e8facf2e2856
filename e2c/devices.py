"""How many GPUs this process may use: one rule for SFT, RL, eval and generation."""

from __future__ import annotations

import os
from collections.abc import Mapping


def gpu_count(env: Mapping[str, str] | None = None) -> int:
    """GPUs visible to this process.

    ``E2C_FORCE_CPU=1`` forces 0. Otherwise ``CUDA_VISIBLE_DEVICES`` decides when it is set (empty, or a
    list starting with ``-1``, means none; ``0,1,3`` means three); else torch's CUDA count (0 when torch
    has no CUDA). ``env`` replaces ``os.environ`` (tests).

    >>> gpu_count({"CUDA_VISIBLE_DEVICES": "0,1,3"})
    3
    >>> gpu_count({"CUDA_VISIBLE_DEVICES": "-1"})
    0
    >>> gpu_count({"E2C_FORCE_CPU": "1", "CUDA_VISIBLE_DEVICES": "0"})
    0
    """
    env = os.environ if env is None else env
    if env.get("E2C_FORCE_CPU") == "1":
        return 0
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [d.strip() for d in visible.split(",") if d.strip()]
        return 0 if not ids or ids[0] == "-1" else len(ids)
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken CUDA install reads as none
        return 0
