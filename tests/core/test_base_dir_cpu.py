"""E2C_BASE_DIR: the pipeline runs' default folders move under it, so runs outlive their checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2c.claims.config import ClaimsConfig
from e2c.core.paths import BASE_DIR_ENV, default_run_folder
from e2c.quickstart.config import Config
from e2c.study.cli import default_out


@pytest.mark.parametrize("value", [None, "", "  "])
def test_without_a_base_folder_runs_stay_under_outputs_cpu(monkeypatch: pytest.MonkeyPatch, value) -> None:
    if value is None:
        monkeypatch.delenv(BASE_DIR_ENV, raising=False)
    else:
        monkeypatch.setenv(BASE_DIR_ENV, value)
    assert default_run_folder("quickstart") == "outputs/quickstart"
    assert Config().out == "outputs/quickstart" and Config().with_fast().out == "outputs/quickstart-fast"
    assert ClaimsConfig().out == "outputs/claims" and ClaimsConfig().with_fast().out == "outputs/claims-fast"


def test_a_base_folder_holds_every_pipeline_runs_default_cpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(BASE_DIR_ENV, str(tmp_path))
    assert Config().out == str(tmp_path / "quickstart")
    assert Config().with_fast().out == str(tmp_path / "quickstart-fast")
    # a flag the user gave wins over the preset's folder
    assert Config(out="mine").with_fast({"out"}).out == "mine"
    assert ClaimsConfig().out == str(tmp_path / "claims")
    assert ClaimsConfig().with_fast().out == str(tmp_path / "claims-fast")
    study = type("S", (), {"source": "configs/study/rl_recipe.toml", "fast": True})()
    assert default_out(study) == str(tmp_path / "study" / "rl_recipe-fast")
    monkeypatch.setenv(BASE_DIR_ENV, "~/runs")
    assert default_run_folder("claims") == str(Path.home() / "runs" / "claims")


def test_help_names_the_folder_the_run_would_use_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from e2c.commandline.flags import setting_flags

    monkeypatch.setenv(BASE_DIR_ENV, str(tmp_path))
    flag = next(f for f in setting_flags(Config) if f.key == "out")
    assert Config.describe_default(flag) == (
        f" (default: {tmp_path / 'quickstart'}; --fast: {tmp_path / 'quickstart-fast'})"
    )
