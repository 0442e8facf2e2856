"""A quickstart run's context and its stage-folder files: the settings and output folder every stage gets,
the shell line of a command, and the ``DONE.json`` / ``STARTED.json`` markers."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2c.quickstart.config import Config


@dataclass(frozen=True)
class Context:
    """One run: the settings and the (absolute) output folder."""

    cfg: Config
    out: Path

    def dir(self, stage: str) -> Path:
        return self.out / stage

    @property
    def data_dir(self) -> Path:
        return self.out / "data"

    @property
    def eval_dir(self) -> Path:
        return self.out / "data" / "eval"


def shell_line(cmd: Sequence[str], env: dict[str, str] | None = None) -> str:
    """A command as one copy-pasteable shell line (environment assignments first)."""
    pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    return (pre + " " if pre else "") + " ".join(shlex.quote(str(c)) for c in cmd)


def rel(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when inside it (for DONE.json and the report), else absolute."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


# ------------------------------------------------------------------------------------------------ files
def read_done(stage_dir: Path) -> dict[str, Any] | None:
    """A stage folder's ``DONE.json`` content, or None (absent or unreadable: the stage is not done)."""
    return _read_json(stage_dir / "DONE.json")


def read_started(stage_dir: Path) -> dict[str, Any] | None:
    return _read_json(stage_dir / "STARTED.json")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
