"""Where a training run logs its metrics: verl's ``Tracking`` backends, chosen with one knob, ``--logger``.

``--logger console,tensorboard`` (the default) becomes ``trainer.logger=[console,tensorboard,file]``:
``file`` is always added, because ``<output-dir>/metrics.jsonl`` is what e2c's own tools read (the SFT
and RL summaries, the quickstart report), and tensorboard writes its event files under
``<output-dir>/tensorboard`` (verl reads ``TENSORBOARD_DIR``). The E2C metrics (``e2c/explore_tokens_mean``,
``e2c/entropy_explore``, ...) reach every tracker under the names they have in ``metrics.jsonl``.
``wandb``, ``mlflow``, ``swanlab`` and the rest need their own package and credentials.
"""

from __future__ import annotations

from pathlib import Path

from e2c.cli import UserError

DEFAULT_LOGGERS = "console,tensorboard"
METRICS_LOGGER = "file"
TENSORBOARD_DIR = "tensorboard"
LOGGER_HELP = (
    "trackers, comma-separated: console, tensorboard, wandb, mlflow, swanlab, clearml, trackio, ... "
    f"(default: {DEFAULT_LOGGERS}; tensorboard writes under OUTPUT_DIR/{TENSORBOARD_DIR}; the metrics file "
    "is always written)"
)


# verl 0.9.1's ``Tracking.supported_backend``, written out: importing verl to read it costs seconds and prints
# its platform and engine warnings before a one-line error; a test checks that the two lists agree.
TRACKERS = (
    "wandb",
    "mlflow",
    "swanlab",
    "vemlp_wandb",
    "tensorboard",
    "console",
    "clearml",
    "trackio",
    "file",
    "rl_insight",
)


def tracker_names(value: str) -> list[str]:
    """``"console,tensorboard"`` -> ``["console", "tensorboard", "file"]``: the named trackers, checked,
    in order, without repeats, and the metrics file last. One line naming a tracker verl does not know.

    >>> tracker_names("console, tensorboard,console")
    ['console', 'tensorboard', 'file']
    """
    valid = TRACKERS
    names: list[str] = []
    for name in (n.strip() for n in value.split(",")):
        if not name:
            continue
        if name not in valid:
            raise UserError(f"--logger {name!r}: unknown tracker; valid: {', '.join(valid)}")
        if name not in names:
            names.append(name)
    if METRICS_LOGGER not in names:
        names.append(METRICS_LOGGER)
    return names


def logger_override(names: list[str]) -> str:
    """The ``trainer.logger`` value of a Hydra override: ``[console,file]``."""
    return "[" + ",".join(names) + "]"


def tracker_env(names: list[str], output_dir: Path) -> dict[str, str]:
    """Environment the trainer needs for these trackers: tensorboard's folder inside the run folder."""
    if "tensorboard" in names:
        return {"TENSORBOARD_DIR": str(Path(output_dir) / TENSORBOARD_DIR)}
    return {}
