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

from e2c.commandline.argtypes import ANY_TEXT, ValueType
from e2c.core.errors import UserError

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


RESULTS_LOGGER_HELP = (
    "trackers that get the run's results and a few sample chains when it ends, comma-separated: "
    "tensorboard (under OUTPUT_DIR/tensorboard), wandb, mlflow, ... (default: none)"
)
SAMPLE_CHAINS = 4  # sample chains per dataset (eval) or per method (TTS) sent to the trackers


def result_trackers(value: str) -> list[str]:
    """Trackers for an eval or TTS run: those named, checked; no metrics file (the run has its own
    ``results.json``) and none at all for ``""``. One line naming an unknown tracker."""
    return [n for n in tracker_names(value) if n != METRICS_LOGGER] if value.strip() else []


def log_results(
    names: list[str],
    output_dir: Path,
    experiment: str,
    scalars: dict[str, float],
    samples: list[tuple[str, str, float]],
    project: str = "e2c",
    step: int = 0,
) -> None:
    """Send a finished run's numbers (``scalars``) and sample chains (``(prompt, response, score)``) to
    verl's trackers, the same classes training logs through: scalars as metrics, samples as the text table
    verl uses for validation generations. Nothing for no trackers."""
    if not names:
        return
    import os

    env = tracker_env(names, output_dir)
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        from verl.utils.tracking import Tracking, ValidationGenerationsLogger

        tracker = Tracking(project_name=project, experiment_name=experiment, default_backend=names)
        tracker.log(data=scalars, step=step)
        if samples:
            ValidationGenerationsLogger(project, experiment).log(names, samples, step)
        tracker.finish()
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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


class ResultTrackers(ValueType):
    """Comma-separated trackers a finished eval or TTS run sends its results to (:mod:`e2c.launch.tracking`);
    the text is kept as given (``e2c.launch.tracking.result_trackers`` reads it)."""

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"comma-separated trackers of {', '.join(TRACKERS)}"

    def parse(self, text: str) -> str:
        s = ANY_TEXT.parse(str(text))
        try:
            result_trackers(s)
        except UserError as e:  # "--logger 'x': unknown tracker; valid: ..."; the parser names the flag
            raise UserError(str(e).removeprefix("--logger ")) from None
        return s


RESULT_TRACKERS = ResultTrackers()
