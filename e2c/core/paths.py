"""Where the project's folders are: one answer for every module, inside a checkout or installed.

The project folder (``configs/``, ``data/``, ``outputs/``) is, in order: ``$E2C_HOME``; the nearest folder at
or above the working directory that has ``configs/e2c_common.yaml``; the checkout this package was imported
from (an editable install); the working directory. Nothing else in the package computes a path from
``__file__``. Pipeline runs default to ``outputs/<name>`` of the working directory, or
``$E2C_BASE_DIR/<name>`` (:func:`default_run_folder`), so a fresh checkout can resume or report them.
More: docs/configuration.md, "Where each default lives".
"""

from __future__ import annotations

import os
from pathlib import Path

from e2c.core.errors import UserError

MARKER = Path("configs") / "e2c_common.yaml"
BASE_DIR_ENV = "E2C_BASE_DIR"


def _is_project(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def cache_dir() -> Path:
    """Root of the toolkit's cache (``$E2C_CACHE`` or ``~/.cache/e2c``): built models, error logs."""
    return Path(os.environ.get("E2C_CACHE", Path.home() / ".cache" / "e2c"))


def project_root() -> Path:
    """The project folder (see the module docstring)."""
    home = os.environ.get("E2C_HOME")
    if home:
        return Path(home).expanduser().resolve()
    cwd = Path.cwd().resolve()
    for folder in (cwd, *cwd.parents):
        if _is_project(folder):
            return folder
    checkout = Path(__file__).resolve().parents[2]  # e2c/core/paths.py -> the checkout
    if _is_project(checkout):
        return checkout
    return cwd


def configs_dir() -> Path:
    """``configs/`` of the project; UserError naming the fix when it is missing."""
    folder = project_root() / "configs"
    if not (folder / "e2c_common.yaml").is_file():
        raise UserError(
            f"no E2C configs in {folder}: run from an E2C checkout, or set E2C_HOME to one "
            "(the folder holding configs/)"
        )
    return folder


def data_dir() -> Path:
    """``data/`` of the project (prepared data, raw downloads)."""
    return project_root() / "data"


def outputs_dir() -> Path:
    """``outputs/`` of the project (every run's default output folder lives under it)."""
    return project_root() / "outputs"


def default_run_folder(name: str) -> str:
    """The default output folder of the pipeline run ``name`` (``quickstart``, ``claims-fast``,
    ``study/rl_recipe``, ...): ``$E2C_BASE_DIR/<name>`` when the variable is set and not empty, else
    ``outputs/<name>`` (from the working directory). The folder itself is checked where the run claims it.

    >>> import os; os.environ.pop("E2C_BASE_DIR", None) and None
    >>> default_run_folder("quickstart")
    'outputs/quickstart'
    """
    base = os.environ.get(BASE_DIR_ENV, "").strip()
    return str(Path(base).expanduser() / name) if base else f"outputs/{name}"


def benchmarks_dir() -> Path:
    """The local copies of the evaluation sets (``gsm8k.jsonl``, ...): ``$E2C_BENCH_DIR``, else
    ``shared/data/benchmarks`` next to the project folder (where the toolkit's benchmarks and tests look)."""
    env = os.environ.get("E2C_BENCH_DIR")
    if env:
        return Path(env).expanduser()
    return project_root().parent / "shared" / "data" / "benchmarks"
