"""Bad input of the code domain is one line naming the record or the setting, exit 2, nothing written: a
record with no tests, tests of the wrong shape, an unknown comparison rule, a sandbox that does not answer
(eval, TTS and the readiness check), an unknown backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_input import assert_one_line_error, run, write_jsonl

GOOD = {"mode": "call", "fn_name": "f", "tests": [{"args": [1], "output": 1}]}
BAD = {
    "no_tests": ({**GOOD, "tests": []}, "no tests"),
    "wrong_shape": ({**GOOD, "tests": [{"input": "1", "output": "1"}]}, "it needs args, output"),
    "unknown_rule": (
        {**GOOD, "compare": "fuzzy"},
        "unknown comparison rule 'fuzzy'; valid: lines, tokens, exact, json",
    ),
}


def code_dir(tmp_path: Path, tests: object) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    write_jsonl(
        d / "humaneval.jsonl",
        {"id": "p1", "problem": "Write f.", "answer": json.dumps(tests), "kind": "code"},
    )
    return d


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_code_record_is_one_line_naming_it_cpu(case: str, tmp_path: Path) -> None:
    tests, needle = BAD[case]
    data = code_dir(tmp_path, tests)
    out = tmp_path / "run"
    r = run(
        "-m",
        "e2c.eval.run",
        "--model",
        "tiny",
        "--dataset",
        "humaneval",
        "--data-dir",
        str(data),
        "--output-dir",
        str(out),
    )
    assert_one_line_error(r, "humaneval.jsonl row 0", needle)
    assert not out.exists()


@pytest.mark.parametrize("entry", ["e2c.eval.run", "e2c.tts"])
def test_a_sandbox_that_does_not_answer_stops_before_any_work_cpu(entry: str, tmp_path: Path) -> None:
    data = code_dir(tmp_path, GOOD)
    out = tmp_path / "run"
    args = ["--model", "tiny", "--dataset", "humaneval", "--data-dir", str(data), "--output-dir", str(out)]
    if entry == "e2c.tts":
        args += ["--methods", "greedy_cot", "--budgets", "1"]
    r = run("-m", entry, *args, "--sandbox", "http://127.0.0.1:9")
    assert_one_line_error(r, "sandbox fusion:http://127.0.0.1:9", "did not run 'print(1)'")
    assert not out.exists() or not any(out.iterdir())


def test_readiness_check_and_unknown_backend_cpu() -> None:
    assert_one_line_error(
        run("-m", "e2c.sandbox", "check", "--sandbox", "http://127.0.0.1:9"), "did not run 'print(1)'"
    )
    assert_one_line_error(
        run("-m", "e2c.sandbox", "check", "--sandbox", "docker"),
        "--sandbox 'docker' is not a sandbox; valid: local, bwrap, fusion:URL",
    )
    r = run("-m", "e2c.sandbox", "check", "--sandbox", "local")
    assert r.returncode == 0 and "print(1) ran in" in r.stdout
