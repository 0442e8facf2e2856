"""The package works installed outside a checkout: its project folders follow ``$E2C_HOME`` and the working
directory, never the place the package's files sit in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import e2c

PROBE = """
import json, e2c
from e2c.core import paths
from e2c.data import registry
print(json.dumps({
    "package": e2c.__file__,
    "root": str(paths.project_root()),
    "data": str(paths.data_dir()),
    "outputs": str(paths.outputs_dir()),
    "eval": str(registry.project_eval_dir()),
    "search": [str(d) for d in registry.search_dirs()],
}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the ``e2c`` package alone in a folder, as pip would put it in site-packages."""
    site = tmp_path_factory.mktemp("site")
    src = Path(e2c.__file__).parent
    shutil.copytree(src, site / "e2c", ignore=shutil.ignore_patterns("__pycache__"))
    return site


def _run(site: Path, cwd: Path, args: list[str], home: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("E2C_HOME", "E2C_DATA_DIR", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)  # the copy only: no checkout on the path
    if home is not None:
        env["E2C_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _probe(site: Path, cwd: Path, home: Path | None = None) -> dict:
    r = _run(site, cwd, ["-c", PROBE], home)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_paths_follow_the_working_directory(installed: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    got = _probe(installed, work)
    assert Path(got["package"]).resolve() == (installed / "e2c" / "__init__.py").resolve()
    assert Path(got["root"]) == work.resolve()
    assert Path(got["data"]) == work.resolve() / "data"
    assert Path(got["outputs"]) == work.resolve() / "outputs"
    assert Path(got["eval"]) == work.resolve() / "data" / "processed" / "eval"
    assert str(work.resolve() / "data" / "processed" / "eval") in got["search"]


def test_paths_follow_e2c_home(installed: Path, tmp_path: Path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    got = _probe(installed, work, home)
    assert Path(got["package"]).resolve() == (installed / "e2c" / "__init__.py").resolve()
    assert Path(got["root"]) == home.resolve()
    assert Path(got["data"]) == home.resolve() / "data"
    assert got["search"][:3] == [
        str(home.resolve() / "data" / d) for d in ("processed/eval", "evaluation")
    ] + [str(home.resolve() / "data" / "raw" / "evaluation")]


def test_a_checkout_above_the_working_directory_wins(installed: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "configs").mkdir(parents=True)
    (project / "configs" / "e2c_common.yaml").write_text("{}\n")
    below = project / "runs" / "today"
    below.mkdir(parents=True)
    got = _probe(installed, below)
    assert Path(got["root"]) == project.resolve()
    assert Path(got["data"]) == project.resolve() / "data"


@pytest.mark.parametrize("module", ["e2c.eval.score", "e2c.data.prepare"])
def test_entry_points_start_from_the_copy(installed: Path, tmp_path: Path, module: str) -> None:
    r = _run(installed, tmp_path, ["-m", module, "--help"])
    assert r.returncode == 0, r.stderr
    assert "usage:" in r.stdout
