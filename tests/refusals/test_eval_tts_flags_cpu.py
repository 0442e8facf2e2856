"""Fail cleanly, lose nothing: eval, TTS and the demos: each case runs the real entry point
as a user would and checks one `error:` line naming the problem, exit 2, no traceback, and files that were
there before left byte-identical; Ctrl-C and SIGTERM stop a run with one line naming what was saved and the
command that resumes it, and that command resumes."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import bad_input
import pytest
from conftest import BENCH_DIR

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
ENTRY = {
    "eval": [sys.executable, "-m", "e2c.eval.run"],
    "eval.sh": ["bash", "scripts/eval.sh"],
    "tts": [sys.executable, "tts/run_tts.py"],
    "tts-m": [sys.executable, "-m", "e2c.tts"],  # the package entry: the same program as the paper's shim
    "inference": [sys.executable, "example_inference.py"],
    "interactive": [sys.executable, "example_interactive.py"],
}
EVAL = [
    "--model",
    "tiny",
    "--dataset",
    "gsm8k",
    "--data-dir",
    str(BENCH_DIR),
    "--limit",
    "2",
    "--sample",
    "1",
    "--backend",
    "hf",
    "--quiet",
]
TTS = [
    "--model",
    "tiny",
    "--backend",
    "hf",
    "--dataset",
    "gsm8k",
    "--data-dir",
    str(BENCH_DIR),
    "--limit",
    "1",
    "--methods",
    "greedy_cot",
    "--budgets",
    "1",
    "--set",
    "cot_tokens=8",
]
DEMO = ["--model", "tiny", "--backend", "hf", "--max-tokens", "16", "--explore-budget", "8"]


def run(
    entry: str, args: list[str], timeout: int = 120, input: str | None = None
) -> subprocess.CompletedProcess:
    """The entry point as a user runs it (a Python one in this process: :func:`bad_input.run`)."""
    cmd = ENTRY[entry]
    return bad_input.run(*cmd[1:], *args, env=ENV, timeout=timeout, input=input)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def fixtures(tmp: Path) -> dict[str, str]:
    """Files the bad inputs point at: a plain file, model folders transformers could not load, bad YAML."""
    (tmp / "file.txt").write_text("keep me\n")
    (tmp / "badcfg").mkdir()
    (tmp / "badcfg" / "config.json").write_text("{not json")
    (tmp / "noweights").mkdir()
    (tmp / "noweights" / "config.json").write_text('{"model_type": "qwen3"}')
    (tmp / "bad.yaml").write_text("methods: [a, b\n")
    names = {
        "file": "file.txt",
        "badcfg": "badcfg",
        "noweights": "noweights",
        "badyaml": "bad.yaml",
        "tmp": ".",
    }
    return {k: str(tmp / v) for k, v in names.items()}


def assert_one_error_line(r: subprocess.CompletedProcess, message: str, code: int = 2) -> None:
    assert r.returncode == code, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-2000:]
    assert message in lines[0], lines[0]


# (entry, extra flags with {placeholders} from fixtures(), the message the one line must hold)
CASES = [
    # eval: the first reported cases, then more of the same kinds
    ("eval", ["--k", "5"], "--k 5: each k must be from 1 to --sample 1"),
    ("eval", ["--k", "0", "1"], "--k must be >= 1, got 0"),
    ("eval", ["--model", "{badcfg}"], "badcfg: cannot read config.json (not valid JSON"),
    ("eval", ["--model", "{noweights}"], "noweights has a config.json but no weights"),
    ("eval", ["--save-path", "{file}"], "file.txt exists and is not a folder"),
    ("eval", ["--save-path", "{file}/run"], "file.txt is a file, not a folder"),
    ("eval", ["--save-path", "/sys/e2c-readonly/run"], "cannot write in /sys"),
    ("eval", [], "--max-tokens (gsm8k's default) is 8192: together more than the model's context of 4096"),
    (
        "eval",
        ["--max-tokens", "20", "--explore-budget", "20"],
        "--explore-budget 20 leaves nothing of --max-tokens 20",
    ),
    ("eval", ["--explore-budget", "9000"], "--explore-budget 9000 leaves nothing of gsm8k's budget of 8192"),
    ("eval", ["--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    ("eval", ["--chunk-size", "0"], "--chunk-size must be >= 1, got 0"),
    ("eval", ["--temp", "nan"], "--temperature must be a finite number >= 0, got nan"),
    ("eval", ["--gpus", "0"], "--gpus must be a GPU count (8) or device ids (0,1,2,3), got '0'"),
    ("eval", ["--max-model-len", "0"], "--max-model-len must be >= 1"),
    (
        "eval",
        ["--backend", "vllm", "--max-model-len", "99999"],
        "--max-model-len 99999 is more than the model's context of 4096",
    ),
    ("eval", ["--dtype", "float13"], "invalid choice: 'float13'"),
    ("eval", ["--data-dir", "{tmp}/nowhere"], "/nowhere does not exist"),
    ("eval", ["--limit", "-1"], "--limit must be >= 1, got -1"),
    ("eval.sh", ["--k", "4", "--sample", "2"], "--k 4: each k must be from 1 to --sample 2"),
    # tts: the first reported cases, then more
    ("tts", ["--limit", "-1"], "--limit must be >= 0, got -1"),
    (
        "tts",
        ["--set", "explore_tokens=abc"],
        "--set explore_tokens=abc: TTS setting explore_budget must be a whole number >= 1, got abc",
    ),
    ("tts", ["--set", "temperature=-1"], "TTS setting temperature must be >= 0, got -1"),
    ("tts", ["--set", "top_p=0"], "TTS setting top_p must be > 0 and <= 1, got 0"),
    ("tts", ["--set", "seed=1.5"], "TTS setting seed must be a whole number >= 0, got 1.5"),
    ("tts", ["--set", "clusters=0"], "TTS setting clusters must be >= 1, got 0"),
    (
        "tts",
        ["--set", "cot_tokens=5000"],
        "cot_tokens (--set) is 5000: together more than the model's context of 4096",
    ),
    ("tts", ["--workers", "0"], "--workers must be >= 1, got 0"),
    (
        "tts",
        ["--dtype", "fp8"],
        "--dtype names an unknown dtype 'fp8'; valid: auto, float32, bfloat16, float16",
    ),
    (
        "tts",
        ["--backend", "tensorrt"],
        "--backend names an unknown backend 'tensorrt' (did you mean 'transformers'?); valid: auto, vllm",
    ),
    ("tts", ["--config", "{badyaml}"], "bad.yaml: not readable YAML"),
    ("tts", ["--output-dir", "{file}"], "file.txt exists and is not a folder"),
    ("tts", ["--model", "{noweights}"], "noweights has a config.json but no weights"),
    # the same checks through the package entry
    ("tts-m", ["--limit", "-1"], "--limit must be >= 0, got -1"),
    ("tts-m", ["--set", "top_p=0"], "TTS setting top_p must be > 0 and <= 1, got 0"),
    ("tts-m", ["--output-dir", "{file}"], "file.txt exists and is not a folder"),
    ("tts-m", ["--bogus"], "unrecognized arguments: --bogus (see python -m e2c.tts --help)"),
    # demos
    ("inference", ["--top_p", "2"], "--top-p must be > 0 and <= 1, got 2"),
    ("inference", ["--temperature", "-1"], "--temperature must be >= 0, got -1"),
    ("inference", ["--max_tokens", "8"], "--max-tokens (8) must exceed --explore-budget (8)"),
    ("inference", ["--problem", " "], "--problem must be a non-empty text, got ' '"),
    ("inference", ["--model_path", "{badcfg}"], "badcfg: cannot read config.json"),
    ("interactive", ["--problems", "{file}"], "file.txt: not valid JSON"),
]


@pytest.mark.parametrize(
    ("entry", "extra", "message"), CASES, ids=[f"{c[0]}:{' '.join(c[1])}" for c in CASES]
)
def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path, entry: str, extra: list[str], message: str
) -> None:
    if "vllm" in extra and importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm not installed")
    if "/sys/" in " ".join(extra) and not Path("/sys").is_dir():
        pytest.skip("needs /sys (a folder nobody can write in, root included)")
    where = fixtures(tmp_path)
    args = [a.format(**where) for a in extra]
    out = tmp_path / "out"
    base = {
        "eval": [*EVAL, "--save-path", str(out)],
        "eval.sh": [*EVAL, "--save-path", str(out)],
        "tts": [*TTS, "--output-dir", str(out)],
        "tts-m": [*TTS, "--output-dir", str(out)],
        "inference": DEMO,
        "interactive": DEMO,
    }[entry]
    before = snapshot(tmp_path)
    r = run(entry, [*base, *args], input="q\n")
    assert_one_error_line(r, message)
    assert snapshot(tmp_path) == before  # nothing written, nothing changed


# ---------------------------------------------------------------------------------------------- demos
def test_custom_problem_is_not_graded_against_the_default_answer() -> None:
    r = run("inference", [*DEMO, "--problem", "What is 2+3?"])
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "reference answer : none given (not graded)" in r.stdout
    assert "reference answer : 18" not in r.stdout and "What is 2+3?" in r.stdout


def test_interactive_line_longer_than_the_context_is_one_line_and_the_demo_goes_on() -> None:
    line = "What is 1+1? " * 20000  # 260 KB: far past the tiny model's 4,096 tokens
    t0 = time.monotonic()
    r = run("interactive", DEMO, input=f"{line}\nq\n", timeout=90)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the problem with its prompt is "), r.stderr[-2000:]
    assert "--max-tokens is 16: together more than the model's context of 4096 tokens" in lines[0]
    assert "(260,000 characters)" in r.stdout and len(r.stdout) < 20_000  # echoed cut, not 260 KB
    assert r.stdout.rstrip().endswith("bye") and time.monotonic() - t0 < 90


# --------------------------------------------------------------------------------------------- tts rerun
def test_tts_rerun_with_other_settings_names_them_and_changes_nothing(
    tmp_path: Path, bench_dir: Path
) -> None:
    out = tmp_path / "out"
    first = run("tts", [*TTS, "--output-dir", str(out)])
    assert first.returncode == 0, first.stderr[-2000:]
    before = snapshot(tmp_path)
    r = run("tts", [*TTS, "--output-dir", str(out), "--set", "temperature=0.5", "--set", "cot_tokens=9"])
    assert_one_error_line(
        r, "holds another run (settings.cot_tokens 8 -> 9; settings.temperature 0.9 -> 0.5)"
    )
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------- interrupts
def complete_lines(path: Path) -> bytes:
    data = path.read_bytes() if path.exists() else b""
    return data[: data.rfind(b"\n") + 1]


def interrupt(
    cmd: list[str], watch: Path, sig: signal.Signals, after: int
) -> tuple[subprocess.Popen, str, str, bytes]:
    """Start ``cmd``, send ``sig`` once ``watch`` has more than ``after`` complete lines; returns the
    process, its output and the lines there were when the signal was sent."""
    # As from a terminal: a suite started in the background (`bash .ci/run &`) inherits an ignored SIGINT,
    # and Python then installs no KeyboardInterrupt handler.
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline, seen = time.monotonic() + 120, b""
    while time.monotonic() < deadline and proc.poll() is None:
        seen = complete_lines(watch)
        if seen.count(b"\n") > after:
            proc.send_signal(sig)
            break
        time.sleep(0.01)
    out, err = proc.communicate(timeout=120)
    return proc, out, err, seen


def check_stopped(
    proc: subprocess.Popen, out: str, err: str, seen: bytes, watch: Path, sig: signal.Signals, saved: str
) -> str:
    """The interrupted run's exit: its code, one last line naming what was saved, the lines intact."""
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig], (proc.returncode, err[-3000:])
    assert "Traceback" not in out + err
    last = err.strip().splitlines()[-1]
    name = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}[sig]
    n = watch.read_bytes().count(b"\n")
    assert last.startswith(f"interrupted ({name}): {n} {saved}") and f" saved in {watch.parent}" in last, last
    assert watch.read_bytes().startswith(seen) and watch.read_bytes().endswith(b"\n")  # nothing lost or cut
    assert all(json.loads(x) for x in watch.read_text().splitlines())
    return last.split("; resume with: ", 1)[1]


@pytest.mark.slow  # a tiny-model run stopped by a signal, then resumed: real processes
@pytest.mark.parametrize("entry", ["eval", "tts", "tts-m"])
def test_interrupt_says_what_was_saved_and_the_printed_command_resumes(
    tmp_path: Path, bench_dir: Path, entry: str
) -> None:
    if entry == "eval":
        args = [
            *EVAL,
            "--limit",
            "5",
            "--max-tokens",
            "64",
            "--chunk-size",
            "1",
            "--save-path",
            str(tmp_path / "run"),
        ]
        watch, saved = tmp_path / "run" / "predictions" / "gsm8k.jsonl", "prediction"
    else:
        args = [
            *TTS,
            "--limit",
            "5",
            "--methods",
            "e2c_sc",
            "--set",
            "explore_tokens=24",
            "--set",
            "execute_tokens=40",
            "--output-dir",
            str(tmp_path / "out"),
        ]
        watch, saved = tmp_path / "out" / "gsm8k" / "tiny" / "records.jsonl", "result"
    total = 5  # one line per problem: 1 sample (eval), 1 method at 1 budget (tts)
    # Ctrl-C during the first run, SIGTERM during the resumed one, then the printed command finishes it.
    proc, out, err, seen = interrupt([*ENTRY[entry], *args], watch, signal.SIGINT, 0)
    command = check_stopped(proc, out, err, seen, watch, signal.SIGINT, saved)
    first = watch.read_bytes()
    assert first.count(b"\n") <= total - 2, "the run went too far before the signal landed"
    # The printed line as given, its command exec'd by the shell so that the signal reaches it.
    exec_line = ["bash", "-c", command.replace(" && ", " && exec ", 1)]
    proc, out, err, seen = interrupt(exec_line, watch, signal.SIGTERM, first.count(b"\n"))
    assert check_stopped(proc, out, err, seen, watch, signal.SIGTERM, saved) == command
    second = watch.read_bytes()
    assert second.startswith(first)
    r = subprocess.run(command, shell=True, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stderr[-3000:]
    final = watch.read_bytes()
    assert final.startswith(second)  # resumed: what was saved stays, only the rest is added
    rows = [json.loads(x) for x in final.decode().splitlines()]
    keys = [(x["index"], x["sample"]) if entry == "eval" else (x["method"], x["problem_id"]) for x in rows]
    assert len(keys) == len(set(keys)) == total  # nothing redone, nothing missing
    if entry in ("tts", "tts-m"):
        assert f"{len(second.splitlines())}/{total} results already in" in r.stdout
    if entry.startswith("tts"):  # the printed command reruns the entry that was typed
        assert f" {' '.join(ENTRY[entry])} --model " in command
