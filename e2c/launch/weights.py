"""How far a model's weights moved from a start: the one measure the RL health report
(:mod:`e2c.rl.health`) and the CPU rollout's per-sync log (:mod:`e2c.verl_cpu.hf_rollout`) both use.
Below both: it needs torch and safetensors only.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

REL_L2 = "weight_rel_l2"
BF16_CHANGED = "weight_bf16_changed_share"


def weight_movement(start: Mapping[str, Tensor], current: Mapping[str, Tensor]) -> dict[str, Any]:
    """How far ``current`` is from ``start`` (both name -> tensor, e.g. state dicts):

    - ``weight_rel_l2``: ``||w - w0|| / ||w0||`` over all compared values, in float32 per tensor;
    - ``weight_bf16_changed_share``: the share of values whose bf16 representation (bits) differs;
    - ``weight_l2_delta``, ``weight_l2_start``, ``weight_values``, ``weight_tensors``: the parts;
    - ``weight_tensors_skipped``: names of ``start`` missing from ``current``, of another shape, or not
      floating point (not compared).

    Only names of ``start`` are visited, one tensor at a time (``current`` may be a lazy mapping).

    >>> import torch
    >>> m = weight_movement({"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([1.0, 2.5])})
    >>> round(m["weight_rel_l2"], 4), m["weight_bf16_changed_share"]
    (0.2236, 0.5)
    """
    import torch

    sq_delta = sq_start = 0.0
    changed = values = tensors = 0
    skipped: list[str] = []
    for name, s in start.items():
        c = current.get(name)
        if (
            c is None
            or tuple(c.shape) != tuple(s.shape)
            or not s.is_floating_point()
            or not c.is_floating_point()
        ):
            skipped.append(name)
            continue
        s = s.detach()
        c = c.detach().to(s.device)
        s32, c32 = s.to(torch.float32), c.to(torch.float32)
        sq_delta += float(torch.linalg.vector_norm(c32 - s32)) ** 2
        sq_start += float(torch.linalg.vector_norm(s32)) ** 2
        del s32, c32
        s16 = s.to(torch.bfloat16).view(torch.int16)
        c16 = c.to(torch.bfloat16).view(torch.int16)
        changed += int((s16 != c16).sum())
        values += s.numel()
        tensors += 1
    l2_delta, l2_start = math.sqrt(sq_delta), math.sqrt(sq_start)
    return {
        REL_L2: l2_delta / l2_start if l2_start > 0 else (0.0 if l2_delta == 0 else math.inf),
        BF16_CHANGED: changed / values if values else 0.0,
        "weight_l2_delta": l2_delta,
        "weight_l2_start": l2_start,
        "weight_values": values,
        "weight_tensors": tensors,
        "weight_tensors_skipped": skipped,
    }


class SafetensorsFolder(Mapping):
    """The tensors of an HF model folder's ``*.safetensors`` files (sharded or not), read one at a time."""

    def __init__(self, folder: str | Path) -> None:
        from safetensors import safe_open

        self.folder = Path(folder)
        files = sorted(self.folder.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"{self.folder}: no *.safetensors file (an HF model folder is needed)")
        self._handles = [safe_open(str(f), framework="pt") for f in files]
        self._where: dict[str, Any] = {}
        for h in self._handles:
            for k in h.keys():  # noqa: SIM118 (a safetensors handle is not a dict)
                self._where[k] = h

    def __getitem__(self, name: str) -> Tensor:
        return self._where[name].get_tensor(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def checkpoint_movement(start_model_dir: str | Path, hf_dir: str | Path) -> dict[str, Any]:
    """:func:`weight_movement` of the HF folder ``hf_dir`` (e.g. ``<run>/global_step_N/actor/huggingface``)
    against the start model's folder; works for any rollout (GPU runs included). Tensors present in only one
    folder (a tied ``lm_head`` saved once) are listed in ``weight_tensors_skipped``."""
    return weight_movement(SafetensorsFolder(start_model_dir), SafetensorsFolder(hf_dir))
