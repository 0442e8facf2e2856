"""verl's checkpoint folders: which step finished last. One reader for SFT, RL and the curriculum."""

from __future__ import annotations

from pathlib import Path

# verl writes this file in a run's checkpoint folder after a checkpoint is complete.
TRACKER = "latest_checkpointed_iteration.txt"


def latest_step(run_dir: Path) -> int | None:
    """The step of the last complete checkpoint in ``run_dir``, or None (no tracker, or not a number).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> latest_step(d) is None
    True
    >>> _ = (d / TRACKER).write_text("12\\n")
    >>> latest_step(d)
    12
    """
    try:
        text = (Path(run_dir) / TRACKER).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The ``global_step_N`` folder of the last complete checkpoint, or None when there is none."""
    step = latest_step(run_dir)
    if step is None:
        return None
    folder = Path(run_dir) / f"global_step_{step}"
    return folder if folder.is_dir() else None
