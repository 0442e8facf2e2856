"""The evaluation runner: metrics from scripted outputs, MCQ scoring, resume, run-folder guards, and the
command line on the tiny model (end to end, and killed mid-run then resumed)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reference_impls import tensorboard_scalars, tensorboard_texts

from e2c.core.errors import UserError
from e2c.data.registry import Record
from e2c.eval.runner import EvalConfig, chunk_problems, read_predictions, run_eval
from e2c.generation.scripted import ScriptedGenerator

ROOT = Path(__file__).resolve().parents[2]


def chain(answer: str, plan: str = "Plan: compute.") -> str:
    return f"{plan}</EXPLORATION><EXECUTION> so \\boxed{{{answer}}}</EXECUTION>"


MATH = [
    Record("gsm8k-a", "What is 2+3?", "5", "math"),
    Record("gsm8k-b", "What is 10/4?", "2.5", "math"),
    Record("gsm8k-c", "What is 7*6?", "42", "math"),
]
MED = [Record("medqa-a", "Which organ pumps blood?", "B", "mcq", ["Liver", "Heart", "Lung", "Skin"])]
RESPONSES = {
    "2+3": [chain("5"), chain("5"), chain("6"), chain("5")],
    "10/4": [chain("5/2"), chain("2"), chain("2"), "I think it is 2.5 but no tags"],
    "7*6": [chain("41"), chain("43"), chain("40"), chain("42")[:30]],
    "organ": [chain("B"), "no letter here at all", chain("\\text{Heart}"), chain("A")],
}


def config(**kw) -> EvalConfig:
    base = dict(
        model="scripted", samples=4, max_tokens=200, chunk_size=4, temperature=1.0, backend="scripted"
    )
    base.update(kw)
    return EvalConfig(**base)


def scripted() -> ScriptedGenerator:
    return ScriptedGenerator.from_responses(RESPONSES)


def test_metrics_from_scripted_outputs(tmp_path: Path) -> None:
    res = run_eval(scripted(), {"gsm8k": MATH, "medqa": MED}, config(), tmp_path)
    g, m = res["datasets"]["gsm8k"], res["datasets"]["medqa"]
    # 2+3: 3/4 correct; 10/4: "5/2" correct, "2" twice wrong, and the untagged "2.5" has no boxed or
    # stated answer (model output gets no last-number fallback) -> 1/4; 7*6: all wrong, one cut short.
    assert math.isclose(g["pass@1"], (3 / 4 + 1 / 4 + 0) / 3)
    assert math.isclose(g["pass@2"], (1 + (1 - 3 / 6) + 0) / 3)
    assert g["pass@4"] == 2 / 3
    # maj@4: 2+3 -> correct (3 votes); 10/4 -> "2" (2 votes) beats the correct one; 7*6 -> wrong.
    assert g["maj@4"] == 1 / 3
    assert g["format_rate"] == 10 / 12 and g["no_answer_rate"] == 2 / 12
    # MCQ: letter, option text and a wrong letter graded; the unparseable sample is simply wrong (no 0.25).
    assert m["pass@1"] == 0.5 and m["no_answer_rate"] == 0.25 and m["pass@4"] == 1.0
    lines = (tmp_path / "predictions" / "medqa.jsonl").read_text().splitlines()
    assert [json.loads(x)["reason"] for x in lines] == ["correct", "no_answer", "correct", "wrong"]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["datasets"]["gsm8k"] == g and saved["git_commit"] and "torch" in saved["versions"]
    assert saved["config"]["samples"] == 4 and saved["average"]["pass@1"] == (g["pass@1"] + m["pass@1"]) / 2


def test_chunks_are_fixed_by_data_order() -> None:
    assert chunk_problems(5, 4, 8) == [range(0, 2), range(2, 4), range(4, 5)]
    assert chunk_problems(3, 8, 4) == [range(0, 1), range(1, 2), range(2, 3)]  # at least one problem


def test_resume_appends_only_what_is_missing(tmp_path: Path) -> None:
    full = run_eval(scripted(), {"gsm8k": MATH}, config(), tmp_path / "a")
    path = tmp_path / "b" / "predictions" / "gsm8k.jsonl"
    run_eval(scripted(), {"gsm8k": MATH}, config(), tmp_path / "b")
    lines = path.read_text().splitlines()
    # As if killed while writing the last chunk: two of its lines written, the third cut in half.
    path.write_text("\n".join(lines[:10]) + "\n" + lines[10][:25])
    gen = scripted()
    again = run_eval(gen, {"gsm8k": MATH}, config(), tmp_path / "b")
    assert again["datasets"] == full["datasets"]
    after = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(after) == 12 and len({(x["index"], x["sample"]) for x in after}) == 12
    # Only the last chunk (the 7*6 problem, one problem per chunk here) was sampled again.
    assert len(gen.calls) == 1 and len(gen.calls[0]["prompts"]) == 1 and "7*6" in gen.calls[0]["prompts"][0]
    # A finished run restarted generates nothing.
    gen2 = scripted()
    run_eval(gen2, {"gsm8k": MATH}, config(), tmp_path / "b")
    assert gen2.calls == []


def test_run_folder_guards(tmp_path: Path) -> None:
    run_eval(scripted(), {"gsm8k": MATH}, config(), tmp_path)
    with pytest.raises(
        UserError, match=r"holds another run \(temperature 1.0 -> 0.5\); use another --output-dir"
    ):
        run_eval(scripted(), {"gsm8k": MATH}, config(temperature=0.5), tmp_path)
    changed = [Record("gsm8k-z", "What is 2+3?", "5", "math"), *MATH[1:]]
    with pytest.raises(UserError, match="the data changed since this run started"):
        run_eval(scripted(), {"gsm8k": changed}, config(), tmp_path)
    path = tmp_path / "predictions" / "gsm8k.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    with pytest.raises(UserError, match=r"gsm8k.jsonl line 2: not a prediction line"):
        read_predictions(path)
    with pytest.raises(UserError, match="--execute-budget needs --explore-budget"):
        run_eval(scripted(), {"gsm8k": MATH}, config(execute_budget=10), tmp_path / "x")


def test_two_phase_settings_reach_the_generator(tmp_path: Path) -> None:
    gen = scripted()
    res = run_eval(gen, {"gsm8k": MATH[:1]}, config(explore_budget=3, execute_budget=50), tmp_path)
    assert [c["max_tokens"] for c in gen.calls] == [3, 50]
    assert res["datasets"]["gsm8k"]["forced_close_rate"] == 1.0  # "Plan: compute." is longer than 3 tokens


# ------------------------------------------------------------------------------------- command line
def cli(*args: str, timeout: int = 300, **kw) -> subprocess.CompletedProcess:
    """The command as a user runs it; its stdout and stderr captured apart unless ``kw`` says where."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    if "stdout" not in kw:
        kw["capture_output"] = True
    return subprocess.run(
        [sys.executable, "-m", "e2c.eval.run", *args],
        cwd=ROOT,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
        **kw,
    )


def tiny_args(bench_dir: Path, save: Path, limit: int = 4) -> list[str]:
    return [
        "--model",
        "tiny",
        "--dataset",
        "gsm8k",
        "--data-dir",
        str(bench_dir),
        "--limit",
        str(limit),
        "--sample",
        "2",
        "--max-tokens",
        "12",
        "--chunk-size",
        "2",
        "--save-path",
        str(save),
        "--backend",
        "hf",
        "--quiet",
    ]


def test_cli_end_to_end_on_tiny_model(bench_dir: Path, tmp_path: Path) -> None:
    r = cli(*tiny_args(bench_dir, tmp_path / "run"), "--logger", "tensorboard")
    assert r.returncode == 0, r.stderr
    assert "pass@1" in r.stdout and "gsm8k" in r.stdout
    head = json.loads(r.stdout.strip().splitlines()[-1])
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert head["gsm8k"]["pass@1"] == round(res["datasets"]["gsm8k"]["pass@1"], 4)
    assert res["datasets"]["gsm8k"]["samples"] == 8 and res["config"]["model"] == "tiny"
    assert res["backend"] == "hf" and res["usage"]["generated_tokens"] > 0
    lines = (tmp_path / "run" / "predictions" / "gsm8k.jsonl").read_text().splitlines()
    assert len(lines) == 8 and all(
        json.loads(x)["explore_tokens"] + json.loads(x)["execute_tokens"] <= 12 for x in lines
    )
    # --logger tensorboard: the results as scalars and four sample chains as text, under the run folder
    scalars = tensorboard_scalars(tmp_path / "run" / "tensorboard")
    assert scalars["eval/gsm8k/pass@1"][0] == pytest.approx(res["datasets"]["gsm8k"]["pass@1"])
    assert scalars["eval/average/format_rate"][0] == pytest.approx(res["average"]["format_rate"])
    text = tensorboard_texts(tmp_path / "run" / "tensorboard")["val/generations"][0]
    first = json.loads(lines[0])
    assert text.count("### Sample") == 4 and first["response"][:40] in text and "parse status" in text


@pytest.mark.slow  # tiny-model evaluations, one killed and resumed (15 s or more on 2 cores)
def test_cli_killed_mid_run_resumes_to_the_same_result(bench_dir: Path, tmp_path: Path) -> None:
    ref = cli(*tiny_args(bench_dir, tmp_path / "ref", limit=12))
    assert ref.returncode == 0, ref.stderr
    save = tmp_path / "killed"
    preds = save / "predictions" / "gsm8k.jsonl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "e2c.eval.run", *tiny_args(bench_dir, save, limit=12)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if preds.exists() and preds.read_text().count("\n") >= 2:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    written = preds.read_text().count("\n")
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert 2 <= written < 24
    r = cli(*tiny_args(bench_dir, save, limit=12))
    assert r.returncode == 0, r.stderr

    def key_lines(p: Path) -> list[str]:
        # A line's "call" holds its chunk's generation seconds, which differ from run to run.
        lines = [json.loads(x) for x in p.read_text().splitlines()]
        return sorted(json.dumps({k: v for k, v in x.items() if k != "call"}) for x in lines)

    assert key_lines(preds) == key_lines(tmp_path / "ref" / "predictions" / "gsm8k.jsonl")
    a = json.loads((save / "results.json").read_text())
    b = json.loads((tmp_path / "ref" / "results.json").read_text())
    assert a["datasets"] == b["datasets"]
    # The cost is the lines': the resumed run's tokens, calls and sequences are the uninterrupted run's.
    same = ("records", "generated_tokens", "calls", "sequences", "prompt_tokens")
    assert {k: a["usage"][k] for k in same} == {k: b["usage"][k] for k in same}


def test_subfolder_default_is_for_the_release_only() -> None:
    from e2c.core.models import RELEASED_REPO
    from e2c.eval.run import default_subfolder

    assert default_subfolder(RELEASED_REPO, None) == "8B"
    assert default_subfolder(RELEASED_REPO, "4B") == "4B"
    assert default_subfolder("models/checkpoints/sft/final", None) is None
    assert default_subfolder("owner/name", "") is None


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    r = cli("--save-path", str(tmp_path / "x"))  # the released checkpoint with no hub
    assert r.returncode == 2 and "--model embedded or --model tiny" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("--model", "tiny", "--dataset", "gsm8kk")
    assert r.returncode == 2 and "did you mean 'gsm8k'" in r.stderr and "Traceback" not in r.stderr
    r = cli("--model", "tiny", "--backend", "tensorrt")
    assert r.returncode == 2 and "invalid choice: 'tensorrt' (choose from 'auto', 'vllm', 'hf'" in r.stderr
    r = cli("--model", "tiny", "--execute-budget", "100")
    assert r.returncode == 2 and "--execute-budget needs --explore-budget" in r.stderr
    r = cli("--model", "tiny", "--sample", "many")
    assert r.returncode == 2 and "--sample" in r.stderr and len(r.stderr.strip().splitlines()) == 1
