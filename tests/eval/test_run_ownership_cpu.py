"""Runs meeting runs, full disks and kills, with the real commands (tiny model, transformers backend):
two identical evaluations into one folder, an evaluation and a TTS run on a disk of a few KiB then resumed
on a bigger one, an evaluation killed with SIGKILL while it holds its folder, and the SFT launcher's log
on a full disk."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import BENCH_DIR
from small_disk import small_disk

from e2c.core.errors import UserError
from e2c.core.run_folder import LOCK_NAME

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "E2C_PROGRESS": "0"}
PROBLEMS, SAMPLES = 12, 2


def tiny(module: str, *flags: str) -> list[str]:
    """``python -m MODULE`` on the tiny model (transformers backend) and the gsm8k file, with ``flags``."""
    base = ["--model", "tiny", "--backend", "hf", "--dataset", "gsm8k", "--data-dir", str(BENCH_DIR)]
    return [sys.executable, "-m", module, *base, *flags]


EVAL = tiny("e2c.eval.run", "--limit", str(PROBLEMS), "--sample", str(SAMPLES), "--max-tokens", "24")
EVAL += ["--chunk-size", "4", "--quiet"]
TTS = tiny("e2c.tts", "--limit", "6", "--methods", "greedy_cot", "--budgets", "1", "--set", "cot_tokens=48")


def run(cmd: list[str], out: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cmd, "--output-dir", str(out)], capture_output=True, text=True, env=ENV, timeout=timeout
    )


def predictions(out: Path) -> Counter:
    """How often each (problem, sample) is in the predictions file; every line must be whole."""
    data = (out / "predictions" / "gsm8k.jsonl").read_bytes()
    assert data.endswith(b"\n"), "the predictions file ends in a cut line"
    return Counter((r["index"], r["sample"]) for r in map(json.loads, data.splitlines()))


def every_sample_once(out: Path) -> bool:
    return predictions(out) == Counter({(i, j): 1 for i in range(PROBLEMS) for j in range(SAMPLES)})


def one_error_line(r: subprocess.CompletedProcess, text: str) -> None:
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.returncode != 0 and len(lines) == 1 and text in lines[0], r.stderr[-3000:]
    assert "Traceback" not in r.stderr


@pytest.mark.slow  # the real command, a model loaded and sampled
def test_two_identical_evaluations_into_one_folder_cpu(tmp_path: Path) -> None:
    """Started together: the one that comes second to the folder refuses in one line naming the other
    (or, when the first has finished by then, resumes it and adds nothing); never a problem twice."""
    out = tmp_path / "run"
    procs = [
        subprocess.Popen(
            [*EVAL, "--output-dir", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for _ in range(2)
    ]
    results = [(p.pid, p.returncode, *p.communicate(timeout=240)) for p in procs]
    results = [(pid, p.returncode, o, e) for (pid, _, o, e), p in zip(results, procs, strict=True)]
    ok = [r for r in results if r[1] == 0]
    refused = [r for r in results if r[1] != 0]
    assert ok, results
    for _, rc, _, err in refused:
        assert rc == 2 and err.count("error:") == 1, err[-2000:]
        assert f"--output-dir {out} is in use by process {ok[0][0]} (eval, since " in err
    assert every_sample_once(out)
    # Started after the first one is done: the same run, resumed, with nothing to add.
    again = run(EVAL, out)
    assert again.returncode == 0, again.stderr[-2000:]
    assert every_sample_once(out)


@pytest.mark.slow  # the real command, a model loaded and sampled
def test_an_evaluation_killed_while_it_holds_its_folder_resumes_cpu(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [*EVAL, "--output-dir", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV
    )
    path = out / "predictions" / "gsm8k.jsonl"
    deadline = time.monotonic() + 180
    while (
        not (path.is_file() and path.stat().st_size) and time.monotonic() < deadline and proc.poll() is None
    ):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert json.loads((out / LOCK_NAME).read_text())["pid"] == proc.pid  # it died holding the folder
    r = run(EVAL, out)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"eval: took over the lock of process {proc.pid} (eval, since " in r.stderr
    assert every_sample_once(out)


@pytest.mark.slow  # the real command, a model loaded and sampled
def test_an_evaluation_on_a_full_disk_then_on_a_bigger_one_cpu(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", 16) as disk:
        out = disk / "run"
        r = run(EVAL, out)
        one_error_line(r, "No space left on device")
        assert "unexpected" not in r.stderr
        data = (out / "predictions" / "gsm8k.jsonl").read_bytes()
        assert data.endswith(b"\n") and 0 < len(data.splitlines()) < PROBLEMS * SAMPLES
        cut_short = len(data.splitlines())
        shutil.copytree(out, tmp_path / "bigger")
    r = run(EVAL, tmp_path / "bigger")
    assert r.returncode == 0, r.stderr[-2000:]
    assert every_sample_once(tmp_path / "bigger")
    assert cut_short < PROBLEMS * SAMPLES


@pytest.mark.slow  # the real command, a model loaded and sampled
def test_a_tts_run_on_a_full_disk_then_on_a_bigger_one_cpu(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", 20) as disk:
        r = run(TTS, disk)
        one_error_line(r, "No space left on device")
        assert "unexpected" not in r.stderr
        [rec] = list(disk.rglob("records.jsonl"))
        data = rec.read_bytes()
        assert not data or data.endswith(b"\n")
        shutil.copytree(disk, tmp_path / "bigger", ignore=shutil.ignore_patterns("lost+found"))
    r = run(TTS, tmp_path / "bigger")
    assert r.returncode == 0, r.stderr[-2000:]
    [rec] = list((tmp_path / "bigger").rglob("records.jsonl"))
    keys = Counter(
        (x["method"], x["budget"], x["problem_id"]) for x in map(json.loads, rec.read_text().splitlines())
    )
    assert len(keys) == 6 and set(keys.values()) == {1}


def test_the_training_log_on_a_full_disk_cpu(tmp_path: Path) -> None:
    """The SFT launcher tees the trainer's output into train.log: on a full disk one line names the file
    and the cause, the trainer is stopped, and the log ends on a whole line."""
    from e2c.sft.launch import run_trainer, train_log

    talker = [
        sys.executable,
        "-c",
        "[print('step', i, 'x' * 200, flush=True) for i in range(10**6)]",
    ]
    with small_disk(tmp_path / "disk", 16) as disk:
        t0 = time.monotonic()
        try:
            run_trainer(talker, disk, dict(ENV))
            raise AssertionError("a full disk went unnoticed")
        except UserError as e:
            assert str(e).startswith(f"cannot write {train_log(disk, 0)}: No space left on device")
        assert time.monotonic() - t0 < 60  # the trainer was stopped, not left talking to a full disk
        data = train_log(disk, 0).read_bytes()
        header, *steps = data.splitlines()
        assert data.endswith(b"\n") and header.startswith(b"# ") and steps
        assert all(line == b"step %d " % i + b"x" * 200 for i, line in enumerate(steps))
