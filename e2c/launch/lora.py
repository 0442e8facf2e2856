"""LoRA adapters as plain weights: one place that turns a PEFT adapter (``lora_A``/``lora_B`` per module) into
the merged weights of the model it adapts, ``W + scaling * B @ A``.

verl trains LoRA through PEFT (``model.lora_rank``), but what it hands on is not a plain model: its model
merger writes the *base* weights with the adapter beside them (``lora_adapter/``), its RL weight sync sends
the adapter tensors alone after the first step, and the ``huggingface/`` folder of an RL checkpoint holds
PEFT's own names (``...q_proj.base_layer.weight``). Eval, TTS, the next stage and the CPU rollout all want
plain weights, so each of those paths merges here: the SFT export (:func:`merge_adapter_folder`), the RL
checkpoint (:func:`merge_peft_folder`) and the rollout's weight sync (:func:`merge_lora`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2c.commandline.argtypes import TEXT, whole
from e2c.commandline.flags import add_setting_flags, setting
from e2c.core.errors import UserError

if TYPE_CHECKING:  # torch is imported where weights are touched: the launchers import this module for flags
    import torch

ADAPTER_DIR = "lora_adapter"  # where verl's model merger puts the adapter of a LoRA checkpoint
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
LORA_META = "lora_train_meta.json"  # rank and alpha verl writes beside every LoRA checkpoint
# PEFT wraps the model twice (PeftModel -> LoraModel -> the HF model) and names the adapter ("default").
_PEFT_PREFIX = "base_model.model."
_LORA_KEY = re.compile(r"^(?P<module>.+)\.lora_(?P<ab>[AB])(?:\.[^.]+)?\.weight$")


@dataclass(frozen=True)
class LoraConfig:
    """What merging needs of a PEFT ``LoraConfig`` (its dict, as verl and ``adapter_config.json`` carry it)."""

    r: int
    alpha: float
    use_rslora: bool = False
    fan_in_fan_out: bool = False
    rank_pattern: tuple[tuple[str, int], ...] = ()
    alpha_pattern: tuple[tuple[str, float], ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoraConfig:
        """Read a PEFT config dict; DoRA and other non-additive variants are refused, not merged wrongly."""
        if d.get("use_dora"):
            raise UserError("LoRA merge: DoRA adapters (use_dora) are not supported; train plain LoRA")
        peft_type = str(d.get("peft_type") or "LORA").upper()
        if peft_type != "LORA" and not peft_type.endswith(".LORA"):
            raise UserError(f"LoRA merge: adapter type {peft_type!r} is not LoRA")
        r = int(d.get("r") or 0)
        if r <= 0:
            raise UserError(f"LoRA merge: rank r={d.get('r')!r} must be positive")
        return cls(
            r=r,
            alpha=float(d.get("lora_alpha", r)),
            use_rslora=bool(d.get("use_rslora", False)),
            fan_in_fan_out=bool(d.get("fan_in_fan_out", False)),
            rank_pattern=tuple((str(k), int(v)) for k, v in (d.get("rank_pattern") or {}).items()),
            alpha_pattern=tuple((str(k), float(v)) for k, v in (d.get("alpha_pattern") or {}).items()),
        )

    def scaling(self, module: str) -> float:
        """PEFT's scale of ``B @ A`` for one module: ``alpha / r`` (``alpha / sqrt(r)`` with rsLoRA), with
        per-module rank and alpha from the patterns (PEFT matches a pattern against the module name's end)."""
        r = _pattern_value(self.rank_pattern, module, self.r)
        alpha = _pattern_value(self.alpha_pattern, module, self.alpha)
        return alpha / (r**0.5 if self.use_rslora else r)


def _pattern_value(patterns: tuple[tuple[str, Any], ...], module: str, default: Any) -> Any:
    for key, value in patterns:
        if module == key or re.match(rf"(.*\.)?{key}$", module):
            return value
    return default


def plain_name(name: str) -> str:
    """A PEFT parameter name as the plain model names it:
    ``base_model.model.model.layers.0.mlp.up_proj.base_layer.weight`` -> ``model.layers.0.mlp.up_proj.weight``."""
    if name.startswith(_PEFT_PREFIX):
        name = name[len(_PEFT_PREFIX) :]
    return name.replace(".base_layer.", ".")


def is_lora_name(name: str) -> bool:
    """Does this parameter belong to an adapter (``lora_A``/``lora_B``, any adapter name)?"""
    return _LORA_KEY.match(name) is not None


def adapter_pairs(adapter: Mapping[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``{module: (A, B)}`` from adapter tensors named as PEFT saves them (with or without the
    ``base_model.model.`` prefix and the adapter name). A module with only one of A and B is an error."""
    halves: dict[str, dict[str, torch.Tensor]] = {}
    for name, tensor in adapter.items():
        m = _LORA_KEY.match(name)
        if m is None:
            raise UserError(f"LoRA merge: {name!r} is not a lora_A/lora_B weight")
        halves.setdefault(plain_name(m["module"]), {})[m["ab"]] = tensor
    pairs = {}
    for module, h in halves.items():
        if set(h) != {"A", "B"}:
            raise UserError(f"LoRA merge: module {module!r} has lora_{''.join(h)} but not both A and B")
        pairs[module] = (h["A"], h["B"])
    return pairs


def lora_delta(
    a: torch.Tensor, b: torch.Tensor, scaling: float, fan_in_fan_out: bool = False
) -> torch.Tensor:
    """``scaling * B @ A`` in fp32 (transposed for Conv1D-style layers that store weights as in x out)."""
    delta = (b.float() @ a.float()) * scaling
    return delta.T if fan_in_fan_out else delta


def merge_lora(
    base: Mapping[str, torch.Tensor],
    adapter: Mapping[str, torch.Tensor],
    config: Mapping[str, Any] | LoraConfig,
) -> dict[str, torch.Tensor]:
    """The merged weights of every module the adapter touches: ``{"<module>.weight": W + scaling * B @ A}``
    in the base weight's dtype. ``base`` holds plain-named weights (at least those modules'); the adapter's
    names may carry PEFT's prefixes. Untouched weights are not returned: they do not change."""
    cfg = config if isinstance(config, LoraConfig) else LoraConfig.from_dict(config)
    merged = {}
    for module, (a, b) in adapter_pairs(adapter).items():
        name = f"{module}.weight"
        if name not in base:
            raise UserError(
                f"LoRA merge: the adapter's module {module!r} has no weight {name!r} in the model"
            )
        w = base[name]
        delta = lora_delta(a, b, cfg.scaling(module), cfg.fan_in_fan_out)
        if delta.shape != w.shape:
            raise UserError(
                f"LoRA merge: {module!r} gives a {tuple(delta.shape)} update to a {tuple(w.shape)} weight"
            )
        merged[name] = (w.float() + delta).to(w.dtype)
    return merged


def split_peft_state(
    state: Mapping[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """A whole PEFT model's state dict -> (plain-named base weights, adapter tensors)."""
    base, adapter = {}, {}
    for name, tensor in state.items():
        if is_lora_name(name):
            adapter[name] = tensor
        else:
            base[plain_name(name)] = tensor
    return base, adapter


# ---------------------------------------------------------------------------------------------- folders
def _read_safetensors(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = {}
    for f in sorted(folder.glob("*.safetensors")):
        state.update(load_file(f))
    return state


def _write_model(folder: Path, state: dict[str, torch.Tensor]) -> None:
    """Replace the folder's weights with ``state`` through transformers, which knows the tied weights and
    the shard index; config, tokenizer and generation config stay as they are."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=next(iter(state.values())).dtype)
    missing = set(model.state_dict()) - set(state)
    if config.tie_word_embeddings or getattr(config.get_text_config(), "tie_word_embeddings", False):
        missing.discard("lm_head.weight")  # saved once, as the embeddings
    if missing:
        raise UserError(f"LoRA merge: the merged weights lack {sorted(missing)[:3]} of {folder}")
    import os
    import tempfile

    # Written beside the folder first, then renamed over the old weights: a merge killed midway leaves
    # the old model whole (for an RL checkpoint, the only copy).
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}.merge-") as tmp:
        model.save_pretrained(tmp, state_dict=state)
        new = {
            f.name
            for f in Path(tmp).iterdir()
            if f.name.endswith((".safetensors", ".safetensors.index.json"))
        }
        for name in sorted(new):
            os.replace(Path(tmp) / name, folder / name)
    for f in list(folder.glob("*.safetensors")) + list(folder.glob("*.safetensors.index.json")):
        if f.name not in new:
            f.unlink()


def adapter_config(folder: Path) -> dict[str, Any]:
    """``adapter_config.json`` of an adapter folder, or one line naming what is wrong."""
    path = folder / ADAPTER_CONFIG
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"LoRA merge: cannot read {path}: {e}") from None


def merge_adapter_folder(model_dir: Path) -> int:
    """Merge ``<model_dir>/lora_adapter`` (verl's model merger's output for a LoRA run: base weights plus the
    adapter) into the folder's weights in place; the adapter stays beside them. Returns the number of merged
    weights (0 when the folder has no adapter)."""
    adapter_dir = Path(model_dir) / ADAPTER_DIR
    if not (adapter_dir / ADAPTER_WEIGHTS).is_file():
        return 0
    from safetensors.torch import load_file

    base = _read_safetensors(Path(model_dir))
    merged = merge_lora(base, load_file(adapter_dir / ADAPTER_WEIGHTS), adapter_config(adapter_dir))
    _write_model(Path(model_dir), {**base, **merged})
    return len(merged)


def merge_peft_folder(hf_dir: Path, meta: Mapping[str, Any]) -> int:
    """Rewrite an HF folder whose weights carry PEFT's names (verl's ``huggingface/`` of a LoRA RL checkpoint)
    as a plain model with the adapter merged, and the adapter alone in ``lora_adapter/`` (PEFT's format, for
    servers that load adapters); ``meta`` is verl's ``lora_train_meta.json`` (rank, alpha). Returns the
    number of merged weights (0 when the weights are already plain, so calling it twice is harmless)."""
    from safetensors.torch import save_file

    hf_dir = Path(hf_dir)
    state = _read_safetensors(hf_dir)
    if not any(is_lora_name(n) or n.startswith(_PEFT_PREFIX) for n in state):
        return 0
    base, adapter = split_peft_state(state)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": meta.get("r"),
        "lora_alpha": meta.get("lora_alpha"),
    }
    pairs = adapter_pairs(adapter)
    merged = merge_lora(base, adapter, config)
    out = hf_dir / ADAPTER_DIR
    out.mkdir(exist_ok=True)
    tensors = {}
    for module, (a, b) in pairs.items():
        tensors[f"{_PEFT_PREFIX}{module}.lora_A.weight"] = a.contiguous()
        tensors[f"{_PEFT_PREFIX}{module}.lora_B.weight"] = b.contiguous()
    save_file(tensors, out / ADAPTER_WEIGHTS)
    targets = sorted({m.rsplit(".", 1)[-1] for m in pairs})
    (out / ADAPTER_CONFIG).write_text(json.dumps({**config, "target_modules": targets}, indent=2))
    _write_model(hf_dir, {**base, **merged})
    return len(merged)


def merge_checkpoint_folder(hf_dir: Path, meta_path: Path) -> int:
    """:func:`merge_peft_folder` for a verl checkpoint whose LoRA rank and alpha are in ``meta_path`` (verl's
    ``lora_train_meta.json``); 0 when the checkpoint has none (full fine-tuning). A metadata file or weights
    that cannot be read are one line naming the metadata file."""
    if not meta_path.is_file():
        return 0
    try:
        return merge_peft_folder(hf_dir, json.loads(meta_path.read_text()))
    except ValueError as e:
        raise UserError(f"{meta_path}: {e}") from None


class AdapterSync:
    """The CPU rollout's side of verl's LoRA weight sync (``lora.merge=False``, verl's default).

    verl sends the base weights once, under PEFT's names (``...q_proj.base_layer.weight``), when the rollout
    started with dummy weights, then only the adapter at every step. The rollout serves a plain model, so
    each adapter is merged into a kept copy of the base (frozen in LoRA training); with no base sync (a
    rollout that loaded real weights) that copy is read from the model folder. Every sync hands the engine
    the whole model: vLLM's weight reload is only defined for a complete set of weights.
    """

    def __init__(self, model_dir: str | Path) -> None:
        self.model_dir = Path(model_dir)
        self.base: dict[str, torch.Tensor] | None = None
        self.adapted: list[str] = []  # the weights the last adapter changed

    def base_weights(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A base sync: plain names for loading, and a copy kept for merging."""
        plain = {plain_name(k): v for k, v in state.items()}
        self.base = {k: v.detach().clone() for k, v in plain.items()}
        return plain

    def merged(
        self, adapter: Mapping[str, torch.Tensor], config: Mapping[str, Any]
    ) -> dict[str, torch.Tensor]:
        """The whole model to load for this adapter: the base with the adapter merged into its modules."""
        if self.base is None:
            self.base = _read_safetensors(self.model_dir)
        merged = merge_lora(self.base, adapter, config)
        self.adapted = list(merged)
        return {**self.base, **merged}

    def shift(self, model: Mapping[str, torch.Tensor]) -> float:
        """L2 distance of these weights from the base (0 for a fresh adapter, whose B is zero): summed over
        the weights the last adapter changed, as every other one is the base's own tensor."""
        assert self.base is not None
        return float(sum(((model[k].float() - self.base[k].float()) ** 2).sum() for k in self.adapted) ** 0.5)


# ------------------------------------------------------------------------------------------------ knobs
LORA_TARGETS_DEFAULT = "all-linear"


@dataclass(frozen=True)
class LoraSettings:
    """The same three LoRA knobs on SFT and RL; each field is its flag, declared here once."""

    lora_rank: int = field(
        default=0,
        metadata=setting(
            "LoRA rank; 0 trains every weight (default: 0). Adapters are merged into the exported models",
            flag="--lora-rank",
            value=whole(0, 65536),
        ),
    )
    lora_alpha: int | None = field(
        default=None,
        metadata=setting(
            "LoRA alpha, the adapter's scale x rank (default: 2 x rank)", flag="--lora-alpha", value=whole(1)
        ),
    )
    lora_targets: str = field(
        default=LORA_TARGETS_DEFAULT,
        metadata=setting(
            f"modules that get adapters, comma-separated (e.g. q_proj,v_proj; default: {LORA_TARGETS_DEFAULT}, "
            "every linear layer but the output head)",
            flag="--lora-targets",
            value=TEXT,
        ),
    )


def add_lora_args(parser: Any) -> None:
    """``--lora-rank``, ``--lora-alpha``, ``--lora-targets`` (:class:`LoraSettings`) on a launcher's parser."""
    add_setting_flags(parser, LoraSettings)


def lora_overrides(args: Any, model_key: str) -> dict[str, str]:
    """Hydra overrides of verl's model config (``model`` in SFT, ``actor_rollout_ref.model`` in RL) for the
    LoRA flags; nothing when ``--lora-rank`` is 0. Bad values are one line."""
    rank = int(getattr(args, "lora_rank", 0) or 0)
    if rank < 0:
        raise UserError(f"--lora-rank {rank}: must be 0 (full fine-tuning) or a positive rank")
    if rank == 0:
        return {}
    alpha = args.lora_alpha if args.lora_alpha is not None else 2 * rank
    if alpha <= 0:
        raise UserError(f"--lora-alpha {alpha}: must be positive")
    targets = [t.strip() for t in str(args.lora_targets).split(",") if t.strip()]
    if not targets or any(not re.fullmatch(r"[A-Za-z0-9_.*-]+", t) for t in targets):
        raise UserError(
            f"--lora-targets {args.lora_targets!r}: module names, comma-separated (e.g. q_proj,v_proj)"
        )
    value = LORA_TARGETS_DEFAULT if targets == [LORA_TARGETS_DEFAULT] else "[" + ",".join(targets) + "]"
    return {
        f"{model_key}.lora_rank": str(rank),
        f"{model_key}.lora_alpha": str(alpha),
        f"{model_key}.target_modules": value,
    }


def lora_flags(args: Any) -> list[str]:
    """The LoRA flags of ``args`` as a command line, for launchers that start other launchers (the
    curriculum); empty without LoRA."""
    if not int(getattr(args, "lora_rank", 0) or 0):
        return []
    out = ["--lora-rank", str(args.lora_rank), "--lora-targets", str(args.lora_targets)]
    return out + (["--lora-alpha", str(args.lora_alpha)] if args.lora_alpha is not None else [])
