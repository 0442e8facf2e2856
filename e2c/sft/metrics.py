"""SFT's per-step metrics, read from verl's file logger as RL reads them.

verl's trainer logs every step through its ``Tracking`` backends; with ``file`` among ``trainer.logger``
(``configs/e2c_sft.yaml``) it writes one JSON object per line, ``{"step": N, "data": {"train/loss": ...}}``
(validation steps: ``{"val/loss": ...}``), to ``$VERL_FILE_LOGGER_PATH``. The launcher points that at
``<output-dir>/metrics.jsonl``, the file RL runs write too. verl opens it afresh (truncating) at every launch,
so earlier launches of a resumed run are kept in ``metrics_history.jsonl`` and merged back afterwards
(:func:`e2c.rl.launch.keep_metrics`, :func:`e2c.rl.launch.restore_metrics`).

While the trainer runs, :class:`MetricsTail` follows the file and notes when each step's record arrived:
the seconds per step come from those times.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from e2c.launch.checkpoints import METRICS, METRICS_HISTORY, step_metrics

# verl's FileLogger writes here when the variable is set (else to ./<project>/<experiment>.jsonl).
PATH_ENV = "VERL_FILE_LOGGER_PATH"
TRAIN_LOSS = "train/loss"
VAL_LOSS = "val/loss"

__all__ = ["METRICS", "METRICS_HISTORY", "PATH_ENV", "MetricsTail", "StepLosses", "read_losses", "watch"]


@dataclass
class StepLosses:
    """Losses per step (a step logged twice, as after a resume, keeps its last value)."""

    train: dict[int, float] = field(default_factory=dict)
    val: dict[int, float] = field(default_factory=dict)

    def add(self, line: str) -> int | None:
        """Take one JSON line of the file logger; returns its step when it holds a training loss. Lines
        that are not records (cut by a kill, or another logger's) are skipped."""
        try:
            record = json.loads(line)
            step, data = int(record["step"]), record["data"]
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(data, dict):
            return None
        if VAL_LOSS in data:
            self.val[step] = float(data[VAL_LOSS])
        if TRAIN_LOSS in data:
            self.train[step] = float(data[TRAIN_LOSS])
            return step
        return None

    def extend(self, lines: Iterable[str]) -> StepLosses:
        for line in lines:
            self.add(line)
        return self


def read_losses(run_dir: Path) -> StepLosses:
    """The training and validation losses of a run folder, every launch of a resumed run
    (:func:`e2c.launch.checkpoints.step_metrics`; empty when there is none).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / METRICS).write_text('{"step": 1, "data": {"train/loss": 2.5}}\\n{"step": 1, "data": {"val/loss": 2.0}}\\n{cut')
    >>> read_losses(d)
    StepLosses(train={1: 2.5}, val={1: 2.0})
    """
    losses = StepLosses()
    for step, data in step_metrics(run_dir).items():
        for key, into in ((TRAIN_LOSS, losses.train), (VAL_LOSS, losses.val)):
            if isinstance(data.get(key), (int, float)):
                into[step] = float(data[key])
    return losses


@dataclass
class MetricsTail:
    """Follows a file-logger JSONL file while it grows: the losses so far and when each training step's
    record was first seen (a file cut back to empty, as verl does when it opens it, is read afresh)."""

    path: Path
    losses: StepLosses = field(default_factory=StepLosses)
    step_times: dict[int, float] = field(default_factory=dict)
    _offset: int = 0
    _partial: bytes = b""

    def poll(self, now: float) -> None:
        """Read what was appended since the last poll; complete lines only."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return
        if size < self._offset:
            self._offset, self._partial = 0, b""
        if size == self._offset:
            return
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            chunk = f.read(size - self._offset)
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            step = self.losses.add(line.decode("utf-8", errors="replace"))
            if step is not None:
                self.step_times.setdefault(step, now)

    def seconds_per_step(self) -> float | None:
        """Median gap between consecutive steps' records, the first step (warm-up) left out."""
        steps = sorted(self.step_times)
        gaps = sorted(
            self.step_times[b] - self.step_times[a] for a, b in itertools.pairwise(steps) if b == a + 1
        )
        return gaps[len(gaps) // 2] if gaps else None


def watch(tail: MetricsTail, stop: threading.Event, interval: float = 0.05) -> threading.Thread:
    """Poll ``tail`` every ``interval`` seconds on a daemon thread until ``stop`` is set (one last poll
    then)."""

    def loop() -> None:
        while not stop.wait(interval):
            tail.poll(time.monotonic())
        tail.poll(time.monotonic())

    thread = threading.Thread(target=loop, name="e2c-sft-metrics", daemon=True)
    thread.start()
    return thread
