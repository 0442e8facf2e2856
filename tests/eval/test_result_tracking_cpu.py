"""Eval and TTS results to trackers (e2c.launch.tracking.log_results): what each run sends, read back from
tensorboard's event files, and the --logger flag's bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from bad_input import assert_one_line_error, run
from reference_impls import tensorboard_scalars, tensorboard_texts

from e2c.data.registry import Record
from e2c.eval.runner import EvalConfig, run_eval
from e2c.eval.runner import tracker_payload as eval_payload
from e2c.generation.scripted import ScriptedGenerator
from e2c.launch.tracking import log_results, result_trackers
from e2c.tts.run import tracker_payload as tts_payload


def _gen() -> ScriptedGenerator:
    return ScriptedGenerator(lambda prompt, j: f"plan {j}</EXPLORATION><EXECUTION>\\boxed{{{j}}}</EXECUTION>")


def test_eval_payload_and_its_tensorboard_record_cpu(tmp_path: Path) -> None:
    recs = [Record(f"q{i}", f"What is {i}?", "0", "math") for i in range(6)]
    cfg = EvalConfig(model="scripted", samples=3, max_tokens=50, chunk_size=3, backend="scripted")
    res = run_eval(_gen(), {"gsm8k": recs, "math500": recs[:2]}, cfg, tmp_path)
    scalars, samples = eval_payload(res, tmp_path, per_dataset=4)
    assert scalars["eval/gsm8k/pass@1"] == pytest.approx(1 / 3)  # sample 0 answers 0: right once in three
    assert scalars["eval/math500/samples"] == 6 and "eval/average/pass@1" in scalars
    assert [s[0].split()[:2] for s in samples] == [["gsm8k", f"q{i}"] for i in range(4)] + [
        ["math500", f"q{i}"] for i in range(2)
    ]
    assert all(s[1].endswith("\\boxed{0}</EXECUTION>") and s[2] == 1.0 for s in samples)
    log_results(["tensorboard"], tmp_path, "run", scalars, samples)
    back = tensorboard_scalars(tmp_path / "tensorboard")
    assert {k: v[0] for k, v in back.items()} == pytest.approx(scalars)
    text = tensorboard_texts(tmp_path / "tensorboard")["val/generations"][0]
    assert text.count("### Sample") == 6 and "math500 q1 (gold 0; parse status ok)" in text


def test_tts_payload_cpu() -> None:
    rows = [
        {"method": "e2c_sc", "budget": 4, "problems": 2, "accuracy": 0.5, "tokens_k": 0.3},
        {"method": "e2c_sc", "budget": 8, "problems": 2, "accuracy": 1.0, "tokens_k": 0.6},
    ]
    results = [
        {
            "method": "e2c_sc",
            "budget": b,
            "problem_id": p,
            "answer": "7",
            "correct": c,
            "response": f"{p}@{b}",
        }
        for b, p, c in ((4, "b", True), (4, "a", False), (8, "b", True), (8, "a", True))
    ] + [{"method": "greedy_cot", "budget": 1, "problem_id": "a", "answer": None, "correct": False}]
    scalars, samples = tts_payload(rows, results, per_method=1)
    assert scalars == {
        "tts/e2c_sc/K4/problems": 2.0,
        "tts/e2c_sc/K4/accuracy": 0.5,
        "tts/e2c_sc/K4/tokens_k": 0.3,
        "tts/e2c_sc/K8/problems": 2.0,
        "tts/e2c_sc/K8/accuracy": 1.0,
        "tts/e2c_sc/K8/tokens_k": 0.6,
    }
    # the largest budget of each method, first problem by id; a run without a chosen answer says so
    assert samples == [
        ("e2c_sc K=8 a (answer 7)", "a@8", 1.0),
        ("greedy_cot K=1 a (answer None)", "(no answer chosen)", 0.0),
    ]


def test_tracker_names_for_results_cpu() -> None:
    assert result_trackers("") == [] and result_trackers(" ") == []
    assert result_trackers("tensorboard,wandb") == ["tensorboard", "wandb"]  # no metrics file: results.json


@pytest.mark.parametrize(
    "cmd",
    [
        ["-m", "e2c.eval.run", "--model", "tiny", "--dataset", "gsm8k"],
        ["tts/run_tts.py", "--model", "tiny", "--dataset", "gsm8k"],
    ],
)
def test_unknown_tracker_is_one_line_cpu(cmd: list[str]) -> None:
    assert_one_line_error(
        run(*cmd, "--logger", "tensorbored"), "--logger 'tensorbored': unknown tracker; valid:"
    )
