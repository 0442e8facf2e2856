"""verl's run folders: which checkpoint finished last, and the metrics file across resumed launches.

One place for SFT, RL and the curriculum.
"""

from __future__ import annotations

import json
from pathlib import Path

from e2c.files import atomic_write_text

# verl writes this file in a run's checkpoint folder after a checkpoint is complete.
TRACKER = "latest_checkpointed_iteration.txt"
# verl's file logger writes one JSON line per step here (VERL_FILE_LOGGER_PATH) and truncates it at each
# launch; the history keeps earlier launches' lines.
METRICS = "metrics.jsonl"
METRICS_HISTORY = "metrics_history.jsonl"


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


def merge_metric_lines(*sources: list[str]) -> list[str]:
    """JSON lines of per-step metrics from several launches of one run, one per step (the latest source
    wins: a step trained again after a resume replaces the record of the killed attempt), by step."""
    by_step: dict[int, str] = {}
    for lines in sources:
        for line in lines:
            if not line.strip():
                continue
            try:
                step = int(json.loads(line)["step"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a kill
            by_step[step] = line.rstrip("\n")
    return [by_step[k] for k in sorted(by_step)]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def _write_lines(path: Path, lines: list[str]) -> None:
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def keep_metrics(run_dir: Path) -> None:
    """Before a launch: fold the run's metrics file into its history (verl's file logger truncates it)."""
    current, history = run_dir / METRICS, run_dir / METRICS_HISTORY
    if _lines(current):
        _write_lines(history, merge_metric_lines(_lines(history), _lines(current)))


def restore_metrics(run_dir: Path) -> None:
    """After a launch: the metrics file holds every step of every launch of this run."""
    history = run_dir / METRICS_HISTORY
    if history.is_file():
        _write_lines(run_dir / METRICS, merge_metric_lines(_lines(history), _lines(run_dir / METRICS)))
