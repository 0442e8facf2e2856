"""Progress bars (e2c.core.progress): drawn on a terminal or with E2C_PROGRESS=1, never in logs; eval and TTS
show samples/runs with rates on the bar, and keep their plain log lines when the bar is off."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from e2c.core import progress
from e2c.data.registry import Record
from e2c.eval.runner import EvalConfig, run_eval
from e2c.generation.scripted import ScriptedGenerator


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_enabled_follows_the_terminal_and_the_env_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)
    assert progress.enabled(_Tty()) and not progress.enabled(io.StringIO())
    monkeypatch.setenv(progress.ENV, "0")
    assert not progress.enabled(_Tty())
    monkeypatch.setenv(progress.ENV, "1")
    assert progress.enabled(io.StringIO())
    monkeypatch.setenv(progress.ENV, "")
    assert progress.bar(3, "x").disable  # pytest's captured stderr is no terminal


RECORDS = [Record(f"gsm8k-{i}", f"What is {i}+1?", str(i + 1), "math") for i in range(5)]


def _gen() -> ScriptedGenerator:
    return ScriptedGenerator(lambda prompt, j: "plan</EXPLORATION><EXECUTION>\\boxed{1}</EXECUTION>")


def _eval(tmp: Path) -> list[str]:
    cfg = EvalConfig(model="scripted", samples=2, max_tokens=50, chunk_size=2, backend="scripted")
    logs: list[str] = []
    run_eval(_gen(), {"gsm8k": RECORDS}, cfg, tmp, logs.append)
    return logs


def test_eval_bar_on_a_terminal_and_log_lines_otherwise_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv(progress.ENV, "0")
    logs = _eval(tmp_path / "quiet")
    assert logs and logs[-1].startswith("gsm8k: 5/5 problems, 10 new samples") and "tok/s" in logs[-1]
    err = capsys.readouterr().err
    assert "sample/s" not in err and "%|" not in err
    monkeypatch.setenv(progress.ENV, "1")
    logs = _eval(tmp_path / "bar")
    err = capsys.readouterr().err
    assert not [x for x in logs if x.startswith("gsm8k:")]  # the bar says it instead
    assert "gsm8k: 100%" in err and "10/10" in err and "5/5 problems" in err and "tok/s" in err
    # a resumed run starts its bar at what the predictions file already holds
    _eval(tmp_path / "bar")
    assert "10/10" in capsys.readouterr().err


def test_tts_bar_names_method_and_budget_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from e2c.tts import TTSSettings
    from e2c.tts.run import run_tts

    recs = RECORDS[:2]
    monkeypatch.setenv(progress.ENV, "1")
    logs: list[str] = []
    run_tts(
        _gen(), recs, ["greedy_cot"], [1, 4], TTSSettings(cot_tokens=20), tmp_path, {"t": 1}, log=logs.append
    )
    err = capsys.readouterr().err
    assert "[tts]: 100%" in err and "4/4" in err and "greedy_cot K=4: 1/2 correct of 2" in err
    assert not [x for x in logs if x.startswith("[tts] 1/")]
