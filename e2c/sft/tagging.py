"""The base model SFT starts from must have the four E2C tags in its tokenizer: a model without them gets a
tagged copy, made once (atomically) and reused by later runs."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.files import check_output_dir
from e2c.core.models import (
    check_model_folder,
    ensure_chain_tokens,
    missing_chain_tokens,
    resolve_model,
    save_model,
)
from e2c.core.paths import project_root


def default_tagged_dir(model_folder: str) -> Path:
    """Where the tagged copy of ``model_folder`` goes by default: ``models/base/<name>-e2c``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model_folder).name) or "model"
    return project_root() / "models" / "base" / f"{name}-e2c"


@dataclass(frozen=True)
class TaggedModel:
    """The model SFT starts from: ``path`` holds (or, once :meth:`make` ran, will hold) a tokenizer with
    the E2C tags. ``source`` is the folder a tagged copy is made from (None: ``path`` is used as it is)."""

    path: str
    note: str
    source: str | None = None

    def make(self) -> str:
        """Make the tagged copy when one is planned (loads and saves the model: the work, not a check)."""
        if self.source is not None and not (Path(self.path) / "config.json").is_file():
            _make_tagged_copy(self.source, Path(self.path))
        return self.path


def plan_tagged_model(spec: str, tagged_dir: str | None, subfolder: str | None = None) -> TaggedModel:
    """Resolve ``spec`` and read its tokenizer (the checks); nothing is written. A tokenizer without the
    E2C tags plans a copy at ``tagged_dir`` (default ``models/base/<name>-e2c``), or reuses one made
    before."""
    res = resolve_model(spec, subfolder)
    path = os.path.abspath(res.path)  # the trainer runs in the repository, not in the caller's folder
    # verl's SFT dataset applies the chat template to every row: a model without one fails in the trainer.
    check_model_folder(Path(path), chat_template=True)
    if not missing_chain_tokens(_tokenizer(path)):
        return TaggedModel(path, f"{res.description} (has the E2C tags)")
    out = Path(os.path.abspath(Path(tagged_dir).expanduser())) if tagged_dir else default_tagged_dir(path)
    if (out / "config.json").is_file():
        check_model_folder(out, chat_template=True)
        if missing_chain_tokens(_tokenizer(str(out))):
            raise UserError(
                f"{out} exists but its tokenizer lacks the E2C tags; remove it or pick --tagged-dir"
            )
        return TaggedModel(str(out), f"tagged copy {out} (reused)")

    check_output_dir(out, "--tagged-dir")
    return TaggedModel(str(out), f"tagged copy {out} of {res.description} (made now)", source=path)


def tagged_model(spec: str, tagged_dir: str | None, subfolder: str | None = None) -> tuple[str, str]:
    """A model folder whose tokenizer has the E2C tags: the resolved folder itself, or a tagged copy
    (made once, atomically, then reused). Returns (folder, note)."""
    plan = plan_tagged_model(spec, tagged_dir, subfolder)
    return plan.make(), plan.note


def _tokenizer(path: str) -> Any:
    """The folder's tokenizer, or one line saying why it does not load (tokenizers raises plain
    Exceptions and KeyErrors for a broken tokenizer.json)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except Exception as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        why = text if isinstance(e, OSError | ValueError) and text else f"{type(e).__name__}: {text}"
        raise UserError(f"model {path} has no loadable tokenizer ({why})") from None


def _make_tagged_copy(path: str, out: Path) -> None:
    from transformers import AutoModelForCausalLM

    tok = _tokenizer(path)
    print(f"adding the E2C tags to {path} -> {out}", flush=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype="auto")
    except (OSError, ValueError) as e:
        raise UserError(f"model {path} has no loadable weights ({str(e).splitlines()[0]})") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    ensure_chain_tokens(model, tok)
    save_model(out, model, tok)
