"""``bash scripts/claims.sh --fast`` end to end on the tiny model: every stage runs, the report holds every
claim's table and verdict, a rerun skips everything, and a changed setting is refused until --from.
(CI runs it after the default suite: ``.ci/run``.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2c.claims import stats as st

ROOT = Path(__file__).resolve().parents[2]
VERDICTS = {st.SUPPORTED, st.NOT_SUPPORTED, st.UNRESOLVED}


def _claims(out: Path, *args: str, timeout: int = 1500) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "e2c.claims", "--fast", "--out", str(out), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


@pytest.mark.slow
def test_claims_fast_end_to_end_slow(tmp_path: Path) -> None:
    out = tmp_path / "claims"
    proc = _claims(out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(summary["verdicts"]) == {"weighting", "tts", "adapt"}
    assert set(summary["verdicts"].values()) <= VERDICTS
    rep = json.loads((out / "report.json").read_text())

    w = rep["weighting"]
    assert {(a["coef"], a["seed"]) for a in w["arms"]} == {(2.0, 0), (2.0, 1), (1.0, 0), (1.0, 1)}
    reused = [a for a in w["arms"] if a["reused_quickstart_rl"]]
    assert [(a["coef"], a["seed"]) for a in reused] == [(2.0, 0)]
    d = w["differences"]["2-1"]
    assert d["seeds"] == [0, 1] and d["problems"] == rep["quickstart_settings"]["eval_problems"]
    assert d["ci"][0] <= d["mean"] <= d["ci"][1]
    for a in w["arms"]:  # every arm trained (its own RL folder and curve) and was evaluated
        assert a["n"] == d["problems"] and len(a["reward_curve"]) == rep["quickstart_settings"]["rl_steps"]
    for a in ("c1_s0", "c1_s1", "c2_s1"):
        assert (out / "weighting" / a / "rl" / "metrics.jsonl").is_file()
        assert (out / "weighting" / a / "eval" / "results.json").is_file()

    t = rep["tts"]
    cfg = rep["settings"]
    assert {(r["method"], r["budget"]) for r in t["rows"]} == {
        (m, b) for m in cfg["tts_methods"] for b in cfg["tts_budgets"]
    }
    assert all(r["n"] == cfg["tts_problems"] for r in t["rows"])
    assert set(t["ratios"]) == set(cfg["tts_methods"]) - {"self_consistency"}
    for r in t["rows"]:
        if r["method"] != "self_consistency":
            assert r["explore_tokens"] > 0 and r["whole_chain_tokens"] == 0

    a = rep["adapt"]
    assert set(a["accuracy"]) == {"none", "ef_sft", "full_sft"}
    assert a["accuracy"]["none"]["new"]["n"] == cfg["adapt_eval"]
    assert a["accuracy"]["ef_sft"]["old"]["n"] == d["problems"]
    assert 0 < a["trained_share"] < 1  # EF-SFT trains a part of what full SFT trains
    assert a["trained_tokens"]["ef_sft"] < a["trained_tokens"]["full_sft"]

    md = (out / "report.md").read_text()
    pages = rep["pages"]  # each arm against its reference, and the TTS run: written and linked
    assert len(pages) == 2 + 3 + 1 and all(p["path"] and f"]({p['path']})" in md for p in pages.values())
    assert (out / pages["view-adapt-new-ef_sft-vs-none.html"]["path"]).stat().st_size > 1000
    for head in (
        "## 1. Exploration weighting",
        "## 2. Test-time scaling",
        "## 3. Exploration-only adaptation",
    ):
        assert head in md
    for v in summary["verdicts"].values():
        assert f"**{v}**" in md
    for name in ("weighting", "tts", "adapt"):
        assert (out / rep["plots"][name]).stat().st_size > 1000

    again = _claims(out, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("complete from an earlier run") == 5

    changed = _claims(out, "--tts-budgets", "1", "3", timeout=300)
    assert changed.returncode == 2 and "stage tts finished with other settings" in changed.stderr
    assert "--from tts" in changed.stderr
