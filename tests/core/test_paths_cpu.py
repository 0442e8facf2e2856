"""Where the project is found from a working directory outside any checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2c.core.paths import configs_dir, project_root

CHECKOUT = Path(__file__).resolve().parents[2]


def test_a_run_from_elsewhere_finds_the_checkout_of_the_package_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("E2C_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert project_root() == CHECKOUT
    assert configs_dir() == CHECKOUT / "configs"
    monkeypatch.setenv("E2C_HOME", str(tmp_path))
    assert project_root() == tmp_path.resolve()
