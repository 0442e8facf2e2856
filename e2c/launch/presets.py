"""The CPU presets under ``configs/cpu/``: YAML files of Hydra overrides, read the same way by SFT and RL.

Each file has a ``preset`` section (sizes for a 2-core CPU) and a ``fixed`` one (what verl needs to run
without an accelerator), each mapping an override key to its value. The launchers pass them before the
user's own overrides, which win.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.paths import configs_dir


def preset_path(name: str) -> Path:
    """``configs/cpu/<name>.yaml`` of the project."""
    return configs_dir() / "cpu" / f"{name}.yaml"


def cpu_preset(name: str, path: Path | None = None) -> dict[str, str]:
    """``configs/cpu/<name>.yaml`` (or ``path``) as Hydra overrides, key -> value: its ``preset`` entries,
    then its ``fixed`` ones (one UserError line when the file is missing or not a mapping of keys to values)."""
    import yaml

    path = path or preset_path(name)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as e:
        raise UserError(f"cannot read the CPU preset {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise UserError(f"{path}: expected the sections 'preset' and 'fixed'")
    out: dict[str, str] = {}
    for section in ("preset", "fixed"):
        entries = doc.get(section) or {}
        if not isinstance(entries, dict):
            raise UserError(f"{path}: '{section}' must map Hydra keys to values")
        out.update({str(k): override_value(v) for k, v in entries.items()})
    return out


def override_value(value: Any) -> str:
    """A YAML value as Hydra's override grammar writes it.

    >>> [override_value(v) for v in (False, None, 8, "sdpa", [1, "a"])]
    ['false', 'null', '8', 'sdpa', '[1,a]']
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    return str(value)
