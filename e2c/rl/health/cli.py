"""``python -m e2c.rl.health RUN_DIR [--start-model DIR]``: the per-step health table of an RL run folder
and its one-line verdict (the metrics are :mod:`e2c.rl.health`'s). A folder without the run's metrics file
is refused in one line (exit 2), not reported as a run with no step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import EXISTING_DIR, TEXT
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError, fail
from e2c.core.models import safetensors_header_error
from e2c.rl.health import format_table, format_warning, health_table, signal_verdict


@dataclass(frozen=True)
class HealthSettings:
    """The command line: the run folder and an optional start model (a folder of safetensors weights)."""

    run_dir: str = field(
        default="", metadata=setting("the RL run's output folder", flag="run_dir", value=TEXT)
    )
    start_model: str | None = field(
        default=None,
        metadata=setting(
            "HF folder of the start model: weight movement from the run's HF checkpoints where "
            "rollout_sync.jsonl has none (GPU runs). Default: rollout_sync.jsonl only.",
            flag="--start-model",
            value=EXISTING_DIR,
        ),
    )


def build_parser() -> Any:
    """The command line (:class:`HealthSettings`)."""

    p = ArgumentParser(
        prog="python -m e2c.rl.health",
        description="Per-step RL health of a run folder (metrics.jsonl + rollout_sync.jsonl) and a one-line "
        "verdict: did the run have signal, did the weights move.",
    )
    add_setting_flags(p, HealthSettings)
    return p


def check_weights_folder(folder: Path, what: str) -> None:
    """A folder whose ``*.safetensors`` files this report reads: at least one, each with a header that
    parses and fits the file (one line before any tensor is read, instead of safetensors' traceback)."""

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise UserError(f"{what} {folder} has no *.safetensors weights (an HF model folder is needed)")
    for f in files:
        why = safetensors_header_error(f)
        if why:
            raise UserError(f"{what} {folder}: weights file {f.name} is {why}")


# What the table is read from (health_table): the per-step metrics (metrics_history.jsonl holds a resumed
# run's earlier launches), and the weight movement beside them.
METRICS_FILES = ("metrics.jsonl", "metrics_history.jsonl")
SYNC_FILE = "rollout_sync.jsonl"


def run_folder_error(run_dir: Path) -> str | None:
    """Why ``run_dir`` is not an RL run folder this report can read (None: it is): it has neither metrics
    file, so there is no step to report (a wrong folder, or a run that has not logged its first step)."""
    if any((run_dir / name).is_file() for name in METRICS_FILES):
        return None
    sync = (
        " (it has rollout_sync.jsonl, but the table's rows are the metrics' steps)"
        if (run_dir / SYNC_FILE).is_file()
        else ""
    )
    return (
        f"run folder {run_dir} has no metrics.jsonl (nor metrics_history.jsonl){sync}: the report reads the "
        f"per-step metrics and {SYNC_FILE} that an RL run (scripts/e2c_rl.sh) writes there; give that run's "
        "output folder, or wait for its first step"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = from_flags(build_parser().parse_args(argv), HealthSettings)
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        # fail(), not a UserError: callers of main() (the tests) see the exit status run_main would give
        fail(f"run folder {run_dir} does not exist" + (" (it is a file)" if run_dir.exists() else ""))
    lacking = run_folder_error(run_dir)
    if lacking:
        raise UserError(lacking)
    start = Path(args.start_model) if args.start_model is not None else None
    if start is not None:
        check_weights_folder(start, "--start-model")
    checks_done()
    rows = health_table(run_dir, start)
    print(format_table(rows))
    print(signal_verdict(rows))
    warning = format_warning(rows)
    if warning:
        print(f"warning: {warning}")
    return 0


if __name__ == "__main__":
    run_main(main)
