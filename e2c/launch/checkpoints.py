"""verl's run folders: which checkpoint finished last, and the metrics file across resumed launches.

One place for SFT, RL and the curriculum: every reader of a run's per-step metrics calls
:func:`step_metrics`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from e2c.core.files import atomic_write_text, read_records

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


RESUME_KEY = "trainer.resume_mode"
STEPS_KEY = "trainer.total_training_steps"


def last_override(overrides: list[str], key: str) -> str | None:
    """The value the last Hydra override of ``key`` gives it (``+key``/``~key`` too), unquoted; None when
    none names it.

    >>> last_override(["a=1", "--config-path=x", "+a='2'"], "a"), last_override(["b=1"], "a")
    ('2', None)
    """
    value = None
    for o in overrides:
        k, eq, v = o.lstrip("+~").partition("=")
        if eq and k == key:
            value = v.strip("'\"")
    return value


def resumes(overrides: list[str]) -> bool:
    """Whether verl resumes from the run folder's latest checkpoint: its ``trainer.resume_mode`` is ``auto``
    (E2C's configs' default) unless the last override of it says otherwise.

    >>> resumes(["trainer.save_freq=1"]), resumes(["trainer.resume_mode=disable"])
    (True, False)
    """
    return (last_override(overrides, RESUME_KEY) or "auto") == "auto"


def trained_to(run_dir: Path, total_steps: int | None, overrides: list[str]) -> int | None:
    """The step of the run folder's last complete checkpoint when it is ``total_steps`` or more and verl
    would resume from it; else None.

    Such a run has nothing left to train, and a relaunch is not harmless: verl's SFT and PPO loops both add
    one to the resumed step before they test for the last one, so they would train a step past the total (a
    run killed after its last checkpoint, before its launcher finished)."""
    step = latest_step(run_dir)
    if step is None or total_steps is None or step < total_steps or not resumes(overrides):
        return None
    return step


def rewind_unlogged(run_dir: Path, step: int) -> int | None:
    """Point verl's tracker at the complete checkpoint before ``step`` (removing it when there is none) and
    return the step verl will resume from (None: the start).

    verl's PPO loop saves a step's checkpoint before it logs the step's metrics; a run killed in between
    has the checkpoint and no record of the step, and resuming from that checkpoint would lose the record
    for good. Training from the checkpoint before it logs the steps again (a later launch's record replaces
    an earlier one's, :func:`step_metrics`)."""
    run_dir = Path(run_dir)
    earlier = sorted(
        int(d.name.removeprefix("global_step_"))
        for d in run_dir.glob("global_step_*")
        if d.is_dir() and d.name.removeprefix("global_step_").isdigit()
    )
    back = max((n for n in earlier if n < step), default=None)
    if back is None:
        (run_dir / TRACKER).unlink(missing_ok=True)
    else:
        atomic_write_text(run_dir / TRACKER, f"{back}\n")
    return back


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The ``global_step_N`` folder of the last complete checkpoint, or None when there is none."""
    step = latest_step(run_dir)
    if step is None:
        return None
    folder = Path(run_dir) / f"global_step_{step}"
    return folder if folder.is_dir() else None


def step_metrics(run_dir: Path) -> dict[int, dict[str, Any]]:
    """Every step's metrics in a run folder, as verl's file logger wrote them: ``{step: {name: value}}`` in
    step order, from ``metrics_history.jsonl`` (earlier launches of a resumed run) then ``metrics.jsonl``.
    Records of one step in one file are merged (SFT logs its validation loss apart); a step of a later
    launch replaces that of an earlier one (trained again after a resume). Lines cut by a kill and lines
    that are not records are skipped; a missing file is no steps.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / METRICS_HISTORY).write_text('{"step": 1, "data": {"a": 1}}\\n{"step": 2, "data": {"a": 9}}\\n')
    >>> _ = (d / METRICS).write_text('{"step": 2, "data": {"a": 2}}\\n{"step": 2, "data": {"b": 3}}\\n{"step": 3, "da')
    >>> step_metrics(d)
    {1: {'a': 1}, 2: {'a': 2, 'b': 3}}
    """
    out: dict[int, dict[str, Any]] = {}
    for name in (METRICS_HISTORY, METRICS):
        launch: dict[int, dict[str, Any]] = {}
        for _, rec in read_records(Path(run_dir) / name, strict=False):
            data = rec.get("data")
            try:
                step = int(rec["step"])
            except (KeyError, TypeError, ValueError):
                continue
            if isinstance(data, dict):
                launch.setdefault(step, {}).update(data)
        out.update(launch)
    return dict(sorted(out.items()))


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
