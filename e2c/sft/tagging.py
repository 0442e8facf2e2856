"""The base model SFT starts from must have the four E2C tags in its tokenizer: a model without them gets a
tagged copy, made once (atomically) and reused by later runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

from e2c.errors import UserError
from e2c.paths import project_root


def default_tagged_dir(model_folder: str) -> Path:
    """Where the tagged copy of ``model_folder`` goes by default: ``models/base/<name>-e2c``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model_folder).name) or "model"
    return project_root() / "models" / "base" / f"{name}-e2c"


def tagged_model(spec: str, tagged_dir: str | None, subfolder: str | None = None) -> tuple[str, str]:
    """A model folder whose tokenizer has the E2C tags: the resolved folder itself, or a tagged copy
    (made once, atomically, then reused). Returns (folder, note)."""
    from transformers import AutoTokenizer

    from e2c.models import ModelSpecError, check_model_folder, missing_chain_tokens, resolve_model

    try:
        res = resolve_model(spec, subfolder)
    except ModelSpecError as e:
        raise UserError(str(e)) from None
    path = os.path.abspath(res.path)  # the trainer runs in the repository, not in the caller's folder
    check_model_folder(Path(path))
    try:
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise UserError(f"model {path} has no loadable tokenizer ({str(e).splitlines()[0]})") from None
    if not missing_chain_tokens(tok):
        return path, f"{res.description} (has the E2C tags)"
    out = Path(tagged_dir) if tagged_dir else default_tagged_dir(path)
    if (out / "config.json").is_file():
        if missing_chain_tokens(AutoTokenizer.from_pretrained(out)):
            raise UserError(
                f"{out} exists but its tokenizer lacks the E2C tags; remove it or pick --tagged-dir"
            )
        return str(out), f"tagged copy {out} (reused)"
    from transformers import AutoModelForCausalLM

    from e2c.models import ensure_chain_tokens, save_model

    print(f"adding the E2C tags to {path} -> {out}", flush=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype="auto")
    except (OSError, ValueError) as e:
        raise UserError(f"model {path} has no loadable weights ({str(e).splitlines()[0]})") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    ensure_chain_tokens(model, tok)
    save_model(out, model, tok)
    return str(out), f"tagged copy {out} of {res.description} (made now)"
