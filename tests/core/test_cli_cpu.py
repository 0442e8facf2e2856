"""Command lines: the re-scoring tool and the inference demo, including their bad-input behaviour."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def preds(tmp_path: Path) -> Path:
    rows = [
        {"response": "plan</EXPLORATION><EXECUTION>\\boxed{18}</EXECUTION>", "gold": {"ans": "18"}},
        {"response": "plan</EXPLORATION><EXECUTION>\\boxed{0.5}</EXECUTION>", "gold": {"ans": "\\frac12"}},
        {"response": "plan</EXPLORATION><EXECUTION>\\boxed{7}</EXECUTION>", "gold": {"ans": "8"}},
        {"response": "no answer at all", "gold": {"ans": "1"}},
    ]
    p = tmp_path / "preds.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_score_prints_table_and_json(preds: Path, tmp_path: Path) -> None:
    out = tmp_path / "graded.jsonl"
    r = run(
        "-m",
        "e2c.eval.score",
        str(preds),
        "--response-key",
        "response",
        "--answer-key",
        "gold.ans",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    last = json.loads(r.stdout.strip().splitlines()[-1])
    assert (last["n"], last["correct"], last["no_answer"]) == (4, 2, 1)
    assert last["accuracy"] == 0.5
    assert "accuracy" in r.stdout.splitlines()[-4] or "accuracy" in r.stdout
    graded = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["correct"] for g in graded] == [True, True, False, False]


def test_score_benchmark_file(bench_dir: Path) -> None:
    r = run(
        "-m",
        "e2c.eval.score",
        str(bench_dir / "gsm8k.jsonl"),
        "--response-key",
        "answer",
        "--answer-key",
        "answer",
        "--limit",
        "50",
    )
    last = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and last["n"] == 50 and last["correct"] == 50


@pytest.mark.parametrize(
    ("setup", "flags", "message"),
    [
        ("missing", [], "no such file"),
        ("malformed", [], "malformed JSON line"),
        ("ok", ["--response-key", "nope"], "--response-key 'nope' not in"),
        ("ok", ["--kind", "essay"], "invalid choice: 'essay'"),
    ],
)
def test_score_bad_input(tmp_path: Path, preds: Path, setup: str, flags: list[str], message: str) -> None:
    target = {"missing": tmp_path / "absent.jsonl", "ok": preds}.get(setup)
    if setup == "malformed":
        target = tmp_path / "bad.jsonl"
        target.write_text('{"response": "x", "gold": {"ans": "1"}}\n{not json\n')
    r = run(
        "-m", "e2c.eval.score", str(target), "--response-key", "response", "--answer-key", "gold.ans", *flags
    )
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# A line a library printed (vLLM's logger, torch's C++ warnings, Python warnings, loading bars), not the demo.
LIBRARY_LINE = re.compile(
    r"^(?:\(\w+ pid=\d+\)\s*)?(?:INFO|WARNING|DEBUG)\b|^\[[WIEF]\d{4} |\b\w*Warning: |Loading safetensors|Triton"
)


def library_lines(r: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (r.stdout + r.stderr).splitlines() if LIBRARY_LINE.search(line)]


@pytest.mark.slow  # the demos on the tiny model (15 s or more on 2 cores)
def test_demo_on_tiny_model() -> None:
    """The demo on vLLM (where installed) shows its chain and no library log line; --verbose shows them."""
    argv = ("example_inference.py", "--model_path", "tiny", "--max_tokens", "40", "--explore_budget", "16")
    r = run(*argv)
    assert r.returncode == 0, r.stderr
    assert "EXPLORATION PHASE:" in r.stdout and "EXECUTION PHASE:" in r.stdout
    assert "tokens           : exploration 16, execution" in r.stdout
    assert "(exploration closed for the model at its budget)" in r.stdout
    assert library_lines(r) == []
    if " on vllm, " in r.stdout:  # the hf backend logs nothing either way
        loud = run(*argv, "--verbose")
        assert loud.returncode == 0 and len(library_lines(loud)) > 5, loud.stdout + loud.stderr


def test_quiet_libraries_settings() -> None:
    """What quieting sets, in a fresh process: vLLM's level, torch's C++ level, the 'vllm' logger; nothing
    under E2C_VERBOSE=1; a vLLM level of the user's own stands."""
    code = (
        "import logging, os; from e2c.commandline.parsing import quiet_libraries, libraries_quiet; quiet_libraries(); "
        "print(os.environ.get('VLLM_LOGGING_LEVEL'), os.environ.get('TORCH_CPP_LOG_LEVEL'), "
        "logging.getLogger('vllm').level, libraries_quiet())"
    )

    def probe(**env: str) -> str:
        base = {
            k: v
            for k, v in os.environ.items()
            if k not in ("E2C_VERBOSE", "VLLM_LOGGING_LEVEL", "TORCH_CPP_LOG_LEVEL")
        }
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert probe() == f"ERROR ERROR {logging.ERROR} True"
    assert probe(E2C_VERBOSE="1") == f"None None {logging.NOTSET} False"
    assert probe(VLLM_LOGGING_LEVEL="DEBUG") == f"DEBUG ERROR {logging.DEBUG} True"


def test_demo_bad_model_is_one_line() -> None:
    r = run("example_inference.py", "--model_path", "no-such-model")
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: --model unknown model 'no-such-model'")
    assert "Traceback" not in r.stderr


@pytest.mark.slow  # the demos on the tiny model (15 s or more on 2 cores)
def test_interactive_demo_through_stdin() -> None:
    r = subprocess.run(
        [
            sys.executable,
            "example_interactive.py",
            "--model_path",
            "tiny",
            "--max_tokens",
            "24",
            "--explore_budget",
            "8",
        ],
        cwd=ROOT,
        input="4\n9\nWhat is 12*13?\n11\n10\n",  # the paper's menu: 9 your own problem, 10 exit
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.count("EXPLORATION PHASE:") == 2 and out.count("EXECUTION PHASE:") == 2
    assert "8. [code]" in out and "[medical]" in out
    assert "D. Aplastic anemia" in out and "reference answer : B" in out  # a built-in MCQ with its options
    assert "9. Enter your own problem" in out and "10. Exit" in out
    assert "no problem 11; pick 1-10" in out and "PROBLEM:\nWhat is 12*13?" in out
    assert out.rstrip().endswith("bye")


def test_interactive_demo_bad_problem_file(tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text("{not json")
    r = run("example_interactive.py", "--model_path", "tiny", "--problems", str(bad))
    assert r.returncode == 2 and r.stderr.startswith(f"error: --problems {bad}: not valid JSON")
    assert len(r.stderr.strip().splitlines()) == 1


def test_problem_file_has_eight_problems_across_domains() -> None:
    items = json.loads((ROOT / "example_problems.json").read_text())
    assert len(items) == 8
    assert {i["category"] for i in items} == {"math", "medical", "code"}
    from e2c.rewards import grade

    for it in items:  # every reference answer is gradeable by the project's grader
        res = grade(
            f"\\boxed{{{it['answer']}}}", it["answer"], it["kind"], options=it.get("options"), fmt=None
        )
        assert res.correct, it["id"]
