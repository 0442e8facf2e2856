"""Every entry point that may run programs checks its sandbox settings before any work: an unknown backend
(``E2C_SANDBOX=docker``), a SandboxFusion server that does not answer, and an ``E2C_SANDBOX_WORKERS`` that is
not a whole number from 1 are each one ``error:`` line, exit 2, nothing written and no work started, in
``python -m e2c.eval.score --kind code``, ``scripts/eval.sh`` (``e2c.eval.run``), ``python -m e2c.tts``, the RL
launcher, ``bench/code_sandbox.py`` and ``python -m e2c.sandbox check``. ``eval.score`` used to grade every
row as an error and exit 0; ``eval.sh`` took ``E2C_SANDBOX_WORKERS=many``; the benchmark started work before
it found the server down."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from bad_input import assert_one_line_error, run, write_jsonl
from conftest import arithmetic_rl_rows

from e2c.data.io import write_parquet

DOWN = "fusion:http://127.0.0.1:9"  # nothing listens on the discard port: refused at once
NOT_RUN = f"sandbox {DOWN} (--sandbox or $E2C_SANDBOX) did not run 'print(1)'"
WORKERS = "$E2C_SANDBOX_WORKERS {!r} is not a positive whole number of concurrent programs (1 to 4096"
# (environment, extra flags, what the one line says)
BAD: dict[str, tuple[dict[str, str], tuple[str, ...], str]] = {
    "backend_docker": ({"E2C_SANDBOX": "docker"}, (), "$E2C_SANDBOX 'docker' is not a sandbox; valid: local"),
    "server_down_flag": ({}, ("--sandbox", DOWN), NOT_RUN),
    "server_down_env": ({"E2C_SANDBOX": DOWN}, (), NOT_RUN),
    "workers_0": ({"E2C_SANDBOX_WORKERS": "0"}, (), WORKERS.format("0")),
    "workers_many": ({"E2C_SANDBOX_WORKERS": "many"}, (), WORKERS.format("many")),
    "workers_fraction": ({"E2C_SANDBOX_WORKERS": "1.5"}, (), WORKERS.format("1.5")),
    "workers_huge": ({"E2C_SANDBOX_WORKERS": "100000"}, (), WORKERS.format("100000")),
}
TESTS = {"mode": "call", "fn_name": "f", "tests": [{"args": [1], "output": 1}]}
PROGRAM = "```python\ndef f(x):\n    return x\n```"


@pytest.fixture(autouse=True)
def no_sandbox_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases set what they test; nothing inherited decides for them."""
    for name in ("E2C_SANDBOX", "E2C_SANDBOX_WORKERS"):
        monkeypatch.delenv(name, raising=False)


def code_data(tmp_path: Path) -> Path:
    """A processed code benchmark of one record (HumanEval's name), as eval and TTS read it."""
    d = tmp_path / "data"
    d.mkdir()
    record = {"id": "p1", "problem": "Write f.", "answer": json.dumps(TESTS), "kind": "code"}
    write_jsonl(d / "humaneval.jsonl", record)
    return d


def untouched(path: Path) -> bool:
    """Nothing was written there: absent, or a folder with no file."""
    return not path.exists() or (path.is_dir() and not any(p.is_file() for p in path.rglob("*")))


@pytest.mark.parametrize("case", sorted(BAD))
def test_eval_score_kind_code(case: str, tmp_path: Path) -> None:
    env, flags, needle = BAD[case]
    responses = write_jsonl(tmp_path / "r.jsonl", {"response": PROGRAM, "answer": json.dumps(TESTS)})
    out = tmp_path / "scored.jsonl"
    args = ("-m", "e2c.eval.score", str(responses), "--kind", "code", "--format", "none", "--out", str(out))
    r = run(*args, *flags, env=env)
    assert_one_line_error(r, needle)
    assert not out.exists() and '"accuracy"' not in r.stdout  # nothing graded


def test_eval_score_kind_code_runs_with_a_good_sandbox(tmp_path: Path) -> None:
    responses = write_jsonl(tmp_path / "r.jsonl", {"response": PROGRAM, "answer": json.dumps(TESTS)})
    r = run(
        "-m", "e2c.eval.score", str(responses), "--kind", "code", "--format", "none", "--sandbox", "local"
    )
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["correct"] == 1 and summary["error"] == 0
    assert "[score] sandbox local:" in r.stdout and "print(1) ran in" in r.stdout


@pytest.mark.parametrize("case", ["workers_many", "workers_0", "backend_docker"])
def test_eval_score_checks_the_settings_whatever_the_kind(case: str, tmp_path: Path) -> None:
    env, flags, needle = BAD[case]
    responses = write_jsonl(tmp_path / "r.jsonl", {"response": "\\boxed{2}", "answer": "2"})
    r = run("-m", "e2c.eval.score", str(responses), "--format", "none", *flags, env=env)
    assert_one_line_error(r, needle)


@pytest.mark.parametrize("case", sorted(BAD))
def test_eval_script(case: str, tmp_path: Path) -> None:
    env, flags, needle = BAD[case]
    out = tmp_path / "run"
    args = ("--model", "tiny", "--dataset", "humaneval", "--data-dir", str(code_data(tmp_path)))
    r = run("scripts/eval.sh", *args, "--output-dir", str(out), *flags, env=env)
    assert_one_line_error(r, needle)
    assert untouched(out)


def test_eval_script_refuses_bad_workers_on_any_benchmark_in_a_real_process(tmp_path: Path) -> None:
    """The reported case, as a user runs it: a real ``bash scripts/eval.sh`` on a math set."""
    out = tmp_path / "run"
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "gsm8k.jsonl", {"id": "g1", "problem": "1+1?", "answer": "2", "kind": "math"})
    args = ("--model", "tiny", "--dataset", "gsm8k", "--data-dir", str(data), "--output-dir", str(out))
    r = run("scripts/eval.sh", *args, env={"E2C_SANDBOX_WORKERS": "many"}, real=True, timeout=300)
    assert_one_line_error(r, WORKERS.format("many"))
    assert untouched(out)


@pytest.mark.parametrize("case", sorted(BAD))
def test_tts(case: str, tmp_path: Path) -> None:
    env, flags, needle = BAD[case]
    out = tmp_path / "tts"
    args = ("--model", "tiny", "--dataset", "humaneval", "--data-dir", str(code_data(tmp_path)))
    args += ("--methods", "greedy_cot", "--budgets", "1", "--output-dir", str(out))
    r = run("-m", "e2c.tts", *args, *flags, env=env)
    assert_one_line_error(r, needle)
    assert untouched(out)


@pytest.mark.parametrize("case", sorted(BAD))
def test_code_sandbox_benchmark(case: str) -> None:
    env, flags, needle = BAD[case]
    r = run("bench/code_sandbox.py", "--limit", "1", "--trivial", "1", "--workers", "1", *flags, env=env)
    assert_one_line_error(r, needle)
    assert r.stdout.strip() == ""  # no table, no timing: no work started


def test_code_sandbox_benchmark_with_a_server_down_in_a_real_process() -> None:
    r = run("bench/code_sandbox.py", "--limit", "1", "--sandbox", DOWN, real=True, timeout=120)
    assert_one_line_error(r, NOT_RUN)
    assert r.stdout.strip() == ""


@pytest.mark.parametrize("case", sorted(BAD))
def test_sandbox_check(case: str) -> None:
    env, flags, needle = BAD[case]
    assert_one_line_error(run("-m", "e2c.sandbox", "check", *flags, env=env), needle)


@pytest.fixture(scope="module")
def rl_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_parquet(arithmetic_rl_rows(8), tmp_path_factory.mktemp("rl") / "rl.parquet")


# A server that does not answer is found after the launcher composes verl's config (seconds): one case of it.
RL_CASES = ["backend_docker", "server_down_flag", "workers_0", "workers_many", "workers_huge"]


@pytest.mark.parametrize("case", RL_CASES)
def test_rl_launcher(case: str, rl_data: Path, tmp_path: Path) -> None:
    env, flags, needle = BAD[case]
    out = tmp_path / "run"
    args = ("--model", "tiny", "--stage", "1", "--train-data", str(rl_data), "--val-data", str(rl_data))
    full_env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "E2C_FORCE_CPU": "1", **env}
    r = run("-m", "e2c.rl.launch", *args, "--output-dir", str(out), *flags, env=full_env, replace_env=True)
    assert_one_line_error(r, needle)
    assert untouched(out)
