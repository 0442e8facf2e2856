"""Fabricated study runs for the study tests: a stand-in for each unit's work that writes the files the real
one writes (DONE.json's results, verl's metrics, the evaluations' predictions and results), with scores that
follow a fixed rule, so the bookkeeping and the report can be tested in seconds without a model.

:func:`fake_work` replaces :data:`e2c.study.work.WORK`'s functions; :func:`score` is the rule (each arm
has its own success rate; every draw is a hash of arm, seed, phase, problem and sample)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from e2c.core.files import atomic_write_json

# A study on the tiny model: an SFT start, an RL arm and its equal-token continuation, two seeds.
STUDY = """
[study]
seeds = [0, 1]
delta = 0.02
validation_problems = 8

[base]
model = "tiny"
eval_problems = 6
eval_samples = 3

[arms.sft]
kind = "sft"
sft_steps = 2

[arms.rl]
kind = "rl"
start = "sft"
rl_steps = 2

[arms.rl_sft]
kind = "sft_continue"
of = "rl"
"""
RATE = {"sft": 0.3, "rl": 0.6, "rl_sft": 0.45}
FAMILIES = ("arithmetic/L1", "code/L1")


def write_study(folder: Path, text: str = STUDY, name: str = "study.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def ids(phase: str, n: int) -> list[str]:
    return [f"synthetic-{'v' if phase == 'screen' else 'e'}{i:03d}" for i in range(n)]


def score(arm: str, seed: int, phase: str, pid: str, sample: int) -> bool:
    """Whether a fabricated sample is right: a hash of everything that names it, against the arm's rate."""
    h = hashlib.sha1(f"{arm}|{seed}|{phase}|{pid}|{sample}".encode()).digest()
    return h[0] / 256 < RATE.get(arm, 0.2)


def fake_work(sc: Any, rep: Any, unit: Any) -> dict[str, Any]:
    """Write what the unit's real work writes (the parts the study reads), return its DONE.json result."""
    d = unit.folder(sc.out)
    study = sc.study
    if unit.kind == "data":
        n = study.base.eval_problems
        atomic_write_json(d / "counts.json", {"splits": {"eval": n}, "chain_tokens": {"median": 40}})
        fam = {pid: FAMILIES[i % 2] for i, pid in enumerate(ids("confirm", n))}
        atomic_write_json(d / "eval_families.json", fam)
        return {"counts": {"splits": {"eval": n}}}
    if unit.kind == "validation":
        n = study.validation_problems
        atomic_write_json(
            d / "families.json", {pid: FAMILIES[i % 2] for i, pid in enumerate(ids("screen", n))}
        )
        return {"problems": n}
    if unit.kind == "filter":
        return {"kept": 4, "prompts": 4}
    if unit.kind in ("sft", "sft_continue", "sft_matched", "rl"):
        a = study.arms[unit.arm]
        if unit.kind == "rl":
            lines = [
                {
                    "step": s,
                    "data": {
                        "critic/score/mean": 0.1 * s,
                        "health/well_formed_share": 0.5 + 0.1 * s,
                        "health/entropy_sampled": 0.3 - 0.05 * s,
                        "response_length/mean": 30.0,
                    },
                }
                for s in range(1, a.cfg.rl_steps + 1)
            ]
            (d / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
            model = f"{unit.key}/global_step_{a.cfg.rl_steps}/actor/huggingface"
            extra: dict[str, Any] = {}
        else:
            (d / "final").mkdir(parents=True, exist_ok=True)
            atomic_write_json(d / "final" / "e2c_sft.json", {"losses": {"1": 2.0, "2": 1.5}})
            model = f"{unit.key}/final"
            extra = {"steps": 2}
        movement = {"weight_rel_l2": 0.01, "weight_bf16_changed_share": 0.4}
        return {"model": model, "start_model": "x", "movement": movement, **extra}
    # evaluation
    n = study.validation_problems if unit.phase == "screen" else study.base.eval_problems
    k = study.base.eval_samples if unit.sampled else 1
    rows, right = [], 0
    for pid in ids(unit.phase, n):
        for j in range(k):
            ok = score(unit.arm, unit.seed, unit.phase, pid, j if unit.sampled else -1)
            right += ok
            rows.append({"id": pid, "sample": j, "correct": ok, "chain_status": "ok"})
    (d / "predictions").mkdir(parents=True, exist_ok=True)
    (d / "predictions" / "synthetic.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    acc = right / len(rows)
    atomic_write_json(d / "results.json", {"datasets": {"synthetic": {"pass@1": acc, "format_rate": 0.75}}})
    return {"pass@1": acc, "format_rate": 0.75, "predictions": f"{unit.key}/predictions/synthetic.jsonl"}


def fabricate_work(monkeypatch: Any) -> list[str]:
    """Replace every unit's work with :func:`fake_work` (pytest's ``monkeypatch``); returns the list of unit
    keys that ran, in order. The RL memory check is off: nothing runs, whatever this machine has free."""
    from e2c.rl.memory import CHECK_ENV
    from e2c.study import work

    monkeypatch.setenv(CHECK_ENV, "0")

    calls: list[str] = []

    def fake(sc: Any, rep: Any, unit: Any) -> dict[str, Any]:
        calls.append(unit.key)
        return fake_work(sc, rep, unit)

    for kind in list(work.WORK):
        monkeypatch.setitem(work.WORK, kind, fake)
    return calls
