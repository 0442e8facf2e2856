"""SFT's result as a plain Hugging Face folder: verl's last checkpoint converted (verl's model merger) and
swapped in atomically as ``<output-dir>/final``, with ``e2c_sft.json`` describing the run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.files import atomic_replace_dir, atomic_write_json
from e2c.core.models import missing_chain_tokens
from e2c.core.paths import project_root
from e2c.launch.lora import LORA_META, merge_adapter_folder, merge_checkpoint_folder
from e2c.verl_cpu import plain_attention_config

META = "e2c_sft.json"


def merge_command(ckpt: Path, target: Path) -> list[str]:
    """verl's model merger: FSDP shards of ``ckpt`` to safetensors in ``target`` (its flags keep verl's
    spelling, ``--local_dir`` / ``--target_dir``: they are verl's, not E2C knobs)."""
    return [
        sys.executable,
        "-m",
        "verl.model_merger",
        "merge",
        "--backend",
        "fsdp",
        "--local_dir",
        str(ckpt),
        "--target_dir",
        str(target),
    ]


def export_final(ckpt: Path, final_dir: Path, meta: dict[str, Any]) -> Path:
    """Write a plain HF folder for ``ckpt`` to ``final_dir`` atomically.

    verl already wrote the weights under ``huggingface/`` when ``checkpoint.save_contents`` includes
    ``hf_model``; otherwise verl's model merger turns the FSDP shards into safetensors (bf16). A LoRA
    run's adapter is merged into the weights (and kept in ``lora_adapter/``). The folder
    is built next to ``final_dir`` and swapped in (:func:`e2c.core.files.atomic_replace_dir`), so a killed
    export leaves the old one.
    """

    def fill(tmp: Path) -> None:
        hf = ckpt / "huggingface"
        if any(hf.glob("*.safetensors")):
            shutil.copytree(hf, tmp, dirs_exist_ok=True)
        else:
            res = subprocess.run(
                merge_command(ckpt, tmp), capture_output=True, text=True, cwd=project_root(), check=False
            )
            if res.returncode != 0 or not any(tmp.glob("*.safetensors")):
                tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
                raise UserError(f"verl's model merger failed on {ckpt}: {' | '.join(tail)}")
        plain_attention_config(tmp)
        # A LoRA run: the merger wrote the base weights with the adapter beside them; the model is the merge.
        if not merge_adapter_folder(tmp):
            # verl's own hf_model save of a LoRA model keeps PEFT's parameter names
            merge_checkpoint_folder(tmp, ckpt / LORA_META)
        # copytree copies the source folder's mode and the merger writes weights 0600: a model folder is for
        # sharing.
        tmp.chmod(0o755)
        for f in tmp.glob("*.safetensors"):
            f.chmod(0o644)
        check_tags(tmp)
        atomic_write_json(tmp / META, meta)

    atomic_replace_dir(final_dir, fill)
    return final_dir


def check_tags(folder: Path) -> None:
    """The exported tokenizer must still carry the E2C tags (one line if not)."""
    from transformers import AutoTokenizer

    missing = missing_chain_tokens(AutoTokenizer.from_pretrained(folder))
    if missing:
        raise UserError(f"the exported tokenizer in {folder} lacks the E2C tags {missing}")
