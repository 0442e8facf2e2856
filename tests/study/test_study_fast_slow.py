"""``python -m e2c.study --fast`` end to end on the tiny model: an SFT arm, an RL arm from it and the RL
arm's equal-token SFT continuation train, are screened on the validation split and confirmed on the
held-out set; the report holds their curves, movements, comparisons and verdicts; a rerun skips every unit.
(CI runs it after the default suite: ``.ci/run``.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from study_fixture import write_study

from e2c.quickstart.config import Config
from e2c.quickstart.context import Context
from e2c.study.report import WORD
from e2c.study.work import data_ids, plain_id

ROOT = Path(__file__).resolve().parents[2]
STUDY = """
[base]
model = "tiny"
# transformers: the tiny model's short evaluations take seconds, where each of vLLM's engines takes ~25 s to
# start (vLLM runs end to end in the quickstart --fast test)
backend = "hf"

[arms.sft]
kind = "sft"

[arms.rl]
kind = "rl"
start = "sft"

[arms.rl_sft]
kind = "sft_continue"
of = "rl"
"""


def _study(path: Path, out: Path, *args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "e2c.study", "--study", str(path), "--fast", "--out", str(out), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


def check_study(out: Path, summary: dict) -> None:
    """What a finished ``--confirm rl`` run of :data:`STUDY` must hold."""
    import pandas as pd

    assert summary["chosen"] == ["rl"]
    assert set(summary["verdicts"].values()) <= set(WORD.values())
    rep = json.loads((out / "study.json").read_text())
    assert rep["selection"]["confirmed"] == ["sft", "rl", "rl_sft"]

    # the screening split: as many problems as asked, none trained on or held out
    val = {plain_id(x) for x in pd.read_parquet(out / "validation" / "synthetic.parquet")["id"]}
    taken = data_ids(Context(Config(), out))  # the SFT, RL and held-out problems
    assert len(val) == rep["protocol"]["screen_problems"] > 0 and not val & taken and len(taken) > 50

    rl = rep["arms"]["rl"]["training"]["0"]
    # the tiny model's rewards are all equal: the update is skipped, the weights stay where they were
    assert rl["steps"] == 1 and rl["train"] is not None and rl["weight_rel_l2"] is not None
    cont = rep["arms"]["rl_sft"]["training"]["0"]
    assert cont["steps"] >= 1 and cont["rl_trained_tokens"] > 0 and cont["weight_rel_l2"] > 0
    sft = rep["arms"]["sft"]["training"]["0"]
    assert sft["signal"] == "loss" and sft["train"] is not None and sft["weight_rel_l2"] > 0
    for arm in ("sft", "rl", "rl_sft"):
        for phase in ("screen", "confirm"):
            p = rep["arms"][arm][phase]
            assert p["avg"]["problems"] > 0 and p["greedy"]["problems"] > 0
    confirm = {(c["against"], c["metric"]) for c in rep["comparisons"]["confirm"]}
    assert confirm == {("sft", "avg"), ("sft", "greedy"), ("rl_sft", "avg"), ("rl_sft", "greedy")}
    for c in rep["comparisons"]["confirm"]:
        assert c["ci"][0] <= c["mean"] <= c["ci"][1] and c["word"] in WORD.values()
    md = (out / "study.md").read_text()
    assert "## Confirmation (held-out set)" in md and "| rl_sft |" in md


@pytest.mark.slow
def test_study_fast_end_to_end_slow(tmp_path: Path) -> None:
    path = write_study(tmp_path, STUDY)
    out = tmp_path / "out"
    proc = _study(path, out, "--confirm", "rl")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    check_study(out, json.loads(proc.stdout.strip().splitlines()[-1]))

    again = _study(path, out, "--confirm", "rl", timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("complete from an earlier run") == 18
