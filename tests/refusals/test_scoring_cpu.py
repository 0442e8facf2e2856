"""Fail cleanly, lose nothing: bad input to the re-scorer (``python -m e2c.eval.score``).

Every bad input runs the real entry point (as a user would) and must give exit status 2, exactly one line on
stderr naming the problem, no traceback, and leave every file that existed before byte-identical. The data
scripts are in test_data_flags_cpu.py, answer extraction in test_extract_linear_cpu.py.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from bad_input import (
    GOOD,
    ROOT,
    UNWRITABLE,
    assert_one_line_error,
    make_dir,
    score,
    skip_without_unwritable,
    snapshot,
    touch,
    write_jsonl,
)

# ------------------------------------------------------------------------------------------ score --out
OUT_CASES = {
    # name: (how --out is made from the input path and tmp folder, words the error must contain)
    "same_path": (lambda inp, d: inp, "is the input file"),
    "same_file_by_dotdot": (lambda inp, d: d / ".." / d.name / inp.name, "is the input file"),
    "relative_same_file": (lambda inp, d: Path(os.path.relpath(inp, ROOT)), "is the input file"),
    "symlink_to_input": (lambda inp, d: _link(d / "link.jsonl", inp, os.symlink), "is the input file"),
    "hard_link_to_input": (lambda inp, d: _link(d / "hard.jsonl", inp, os.link), "is the input file"),
    "out_is_a_folder": (lambda inp, d: make_dir(d / "results"), "is a folder"),
    "parent_is_a_file": (lambda inp, d: touch(d / "plain") / "graded.jsonl", "is a file, not a folder"),
    "grandparent_is_a_file": (
        lambda inp, d: touch(d / "plain") / "a" / "b.jsonl",
        "is a file, not a folder",
    ),
    "unwritable_folder": (lambda inp, d: UNWRITABLE / "graded.jsonl", "cannot write in"),
}


def _link(p: Path, target: Path, how: Callable[[Path, Path], None]) -> Path:
    how(target, p)
    return p


@pytest.mark.parametrize("case", OUT_CASES, ids=str)
def test_score_out_never_destroys_anything(tmp_path: Path, case: str) -> None:
    skip_without_unwritable(case)
    make, words = OUT_CASES[case]
    inp = write_jsonl(tmp_path / "preds.jsonl", GOOD, {**GOOD, "answer": "3"})
    out = make(inp, tmp_path)
    before = snapshot(tmp_path)
    r = score(inp, "--out", out)
    line = assert_one_line_error(r, "--out", words)
    assert str(out) in line
    assert snapshot(tmp_path) == before  # the input, the folder's files, no temporary left behind


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_score_out_in_read_only_folder(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "preds.jsonl", GOOD)
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "graded.jsonl").write_text("earlier results\n")
    ro.chmod(0o555)
    try:
        before = snapshot(tmp_path)
        assert_one_line_error(score(inp, "--out", ro / "graded.jsonl"), "cannot write in")
        assert snapshot(tmp_path) == before
    finally:
        ro.chmod(0o755)


def test_score_out_still_works_and_replaces_an_earlier_result(tmp_path: Path) -> None:
    inp = write_jsonl(tmp_path / "preds.jsonl", GOOD, {**GOOD, "answer": "3"})
    out = tmp_path / "new" / "graded.jsonl"  # a missing folder is created
    r = score(inp, "--out", out)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["correct"] for x in out.read_text().splitlines()] == [True, False]
    out.write_text("old\n")
    assert score(inp, "--out", out).returncode == 0 and out.read_text() != "old\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["graded.jsonl"]


def test_score_out_through_links_devices_and_pipes(tmp_path: Path) -> None:
    # Was: the temporary file renamed over the path, which replaces a link or a pipe (and /dev/null, as
    # root: not tried here, a regression would break the machine) with a plain file of mode 0600.
    inp = write_jsonl(tmp_path / "preds.jsonl", GOOD)
    earlier = tmp_path / "earlier.jsonl"
    earlier.write_text("old results\n")
    earlier.chmod(0o640)
    link = tmp_path / "latest.jsonl"
    link.symlink_to(earlier.name)
    assert score(inp, "--out", link).returncode == 0
    assert link.is_symlink() and json.loads(earlier.read_text())["correct"] is True
    assert earlier.stat().st_mode & 0o777 == 0o640
    fresh = tmp_path / "fresh.jsonl"
    assert score(inp, "--out", fresh).returncode == 0 and fresh.stat().st_mode & 0o777 == 0o666 & ~_umask()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert score(inp, "--out", fifo).returncode == 0
    reader.join(30)
    assert fifo.is_fifo() and json.loads(got[0])["correct"] is True


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_score_out_keeps_a_lone_surrogate(tmp_path: Path) -> None:
    # Was: UnicodeEncodeError traceback while writing --out, and a stray .tmp file.
    inp = tmp_path / "preds.jsonl"
    inp.write_text('{"response": "\\\\boxed{\\ud800}", "answer": "1"}\n', encoding="utf-8")
    out = tmp_path / "graded.jsonl"
    r = score(inp, "--out", out)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    (row,) = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert row["extracted"] == "\ud800" and row["correct"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graded.jsonl", "preds.jsonl"]


# ---------------------------------------------------------------------------------- score: value types
@pytest.mark.parametrize(
    ("rows", "words"),
    [
        (
            [{"response": ["\\boxed{2}"], "answer": [2]}],
            ["row 1", "'response'", "a list of 1 item", "response.0"],
        ),
        ([{"response": {"text": "\\boxed{2}"}, "answer": "2"}], ["row 1", "'response'", "an object"]),
        ([{"response": None, "answer": "2"}], ["row 1", "'response'", "null"]),
        ([{"response": 2, "answer": 2}], ["row 1", "'response'", "a number"]),
        ([{"response": True, "answer": "True"}], ["row 1", "'response'", "a boolean"]),
        ([GOOD, GOOD, {"response": [], "answer": "2"}], ["row 3", "a list of 0 items"]),
        (
            [{"response": "\\boxed{2}", "answer": {"value": 2}}],
            ["row 1", "--answer-key 'answer'", "an object"],
        ),
        ([{"response": "\\boxed{B}", "answer": True}], ["row 1", "--answer-key 'answer'", "a boolean"]),
        ([{"response": "\\boxed{2}", "answer": [[2]]}], ["row 1", "--answer-key", "nested value"]),
        ([GOOD, {"response": "\\boxed{2}"}], ["row 2", "'answer' missing"]),
        ([{"response": "\\boxed{nan}", "answer": float("nan")}], ["row 1", "--answer-key 'answer' is NaN"]),
    ],
    ids=[
        "list",
        "object",
        "null",
        "number",
        "boolean",
        "empty_list_row3",
        "gold_object",
        "gold_boolean",
        "gold_nested_list",
        "gold_missing_row2",
        "gold_nan",
    ],
)
def test_score_refuses_values_it_cannot_grade(tmp_path: Path, rows: list[dict], words: list[str]) -> None:
    inp = write_jsonl(tmp_path / "preds.jsonl", *rows)
    assert_one_line_error(score(inp), "preds.jsonl", *words)


@pytest.mark.parametrize(
    ("row", "flags", "correct"),
    [
        ({"response": "\\boxed{2}", "answer": 2}, [], 1),  # an int reference is a legit answer
        ({"response": "\\boxed{2.5}", "answer": 2.5}, [], 1),
        ({"response": "\\boxed{2, 3}", "answer": ["2", 3]}, [], 1),  # a multi-part reference
        ({"response": "\\boxed{7}", "answer": None}, [], 0),  # counted as unparseable_gold
        ({"response": ["x", "\\boxed{4}"], "answer": "4"}, ["--response-key", "response.1"], 1),
        (
            {"response": "\\boxed{1+2}", "answer": {"target": 3, "numbers": [1, 2]}},
            ["--kind", "countdown"],
            1,
        ),
    ],
    ids=["int_gold", "float_gold", "list_gold", "null_gold", "list_index_key", "countdown_object_gold"],
)
def test_score_accepts_real_reference_types(
    tmp_path: Path, row: dict, flags: list[str], correct: int
) -> None:
    inp = write_jsonl(tmp_path / "preds.jsonl", row)
    r = score(inp, "--format", "none", *flags)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["correct"] == correct


def test_benchmark_numbers_as_responses_are_refused_but_as_references_graded(
    bench_dir: Path, tmp_path: Path
) -> None:
    # amc23's answers are floats: scoring them as responses is a wrong key, as references they are fine.
    r = score(bench_dir / "amc23.jsonl", "--response-key", "answer")
    assert_one_line_error(r, "amc23.jsonl row 1", "--response-key 'answer' is a number")
    rows = [json.loads(x) for x in (bench_dir / "amc23.jsonl").read_text().splitlines()[:5]]
    inp = write_jsonl(
        tmp_path / "amc.jsonl",
        *({"response": f"\\boxed{{{r['answer']}}}", "answer": r["answer"]} for r in rows),
    )
    r = score(inp, "--format", "none")
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[-1])["correct"] == 5, r.stderr
    # olympiadbench's solutions are lists of strings: one item is picked with an index.
    r = score(
        bench_dir / "olympiadbench.jsonl",
        "--response-key",
        "solution.0",
        "--answer-key",
        "final_answer",
        "--format",
        "none",
        "--limit",
        "3",
        "--timeout",
        "5",
    )
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[-1])["n"] == 3, r.stderr
    assert_one_line_error(
        score(
            bench_dir / "olympiadbench.jsonl", "--response-key", "solution", "--answer-key", "final_answer"
        ),
        "olympiadbench.jsonl row 1",
        "is a list of 1 item",
        "solution.0",
    )


# ------------------------------------------------------------------------------ score: files and flags
def _bytes(data: bytes) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        p = d / "in.jsonl"
        p.write_bytes(data)
        return p

    return make


def _named(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        p = d / name
        p.write_bytes(data)
        return p

    return make


GOOD_LINE = json.dumps(GOOD).encode() + b"\n"
FILE_CASES = {
    "missing_file": (lambda d: d / "absent.jsonl", ["no such file"]),
    "folder_as_file": (lambda d: make_dir(d / "folder.jsonl"), ["is a folder"]),
    "empty_file": (_bytes(b""), ["no rows"]),
    "blank_lines_only": (_bytes(b"\n  \n\n"), ["no rows"]),
    "not_utf8_line_3": (
        _bytes(GOOD_LINE * 2 + b'{"response": "caf\xe9", "answer": "1"}\n'),
        ["in.jsonl:3", "not UTF-8", "0xe9"],
    ),
    "latin1_first_line": (_bytes(b"\xff\xfe{}\n"), ["in.jsonl:1", "not UTF-8"]),
    "utf16_file": (_bytes(json.dumps(GOOD).encode("utf-16")), ["in.jsonl:1", "not UTF-8"]),
    "malformed_line_2": (_bytes(GOOD_LINE + b"{not json}\n"), ["in.jsonl:2", "malformed JSON line"]),
    "truncated_last_line": (
        _bytes(GOOD_LINE + b'{"response": "x", "ans'),
        ["in.jsonl:2", "malformed JSON line"],
    ),
    "array_line": (_bytes(b"[1, 2]\n"), ["in.jsonl:1", "expected a JSON object, got a list of 2 items"]),
    "string_line": (_bytes(b'"text"\n'), ["in.jsonl:1", "got a string"]),
    "deeply_nested_line": (
        _bytes(b'{"response": "x", "answer": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"),
        ["in.jsonl:1", "nested too deeply"],
    ),
    "5000_digit_integer": (
        _bytes(b'{"response": "x", "answer": ' + b"7" * 5000 + b"}\n"),
        ["in.jsonl:1", "digits"],
    ),
    "json_not_utf8": (_named("in.json", b'[{"response": "\xe9"}]'), ["in.json:1", "not UTF-8"]),
    "json_empty": (_named("in.json", b""), ["in.json", "empty file"]),
    "json_object_not_list": (
        _named("in.json", b'{"response": "x"}'),
        ["expected a JSON list of objects, got an object"],
    ),
    "json_list_of_numbers": (_named("in.json", b"[1, 2]"), ["item 0", "a number, not a JSON object"]),
    "json_malformed": (_named("in.json", b'[{"a": 1},\n{"b": }]'), ["in.json", "malformed JSON at line 2"]),
    "parquet_garbage": (
        _named("in.parquet", b"PAR1 not really"),
        ["in.parquet", "not a readable parquet file"],
    ),
}


@pytest.mark.parametrize("case", FILE_CASES, ids=str)
def test_score_bad_files(tmp_path: Path, case: str) -> None:
    make, words = FILE_CASES[case]
    inp = make(tmp_path)
    before = snapshot(tmp_path)
    assert_one_line_error(score(inp, "--out", tmp_path / "graded.jsonl"), *words)
    assert snapshot(tmp_path) == before


def test_score_reads_a_byte_order_mark(tmp_path: Path) -> None:
    inp = tmp_path / "bom.jsonl"
    inp.write_bytes(b"\xef\xbb\xbf" + GOOD_LINE)
    r = score(inp)
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[-1])["correct"] == 1, r.stderr


FLAG_CASES = {
    "kind_unknown": (["--kind", "essay"], ["invalid choice: 'essay'"]),
    "format_unknown": (["--format", "xml"], ["invalid choice: 'xml'"]),
    "timeout_zero": (["--timeout", "0"], ["--timeout must be a positive number"]),
    "timeout_negative": (["--timeout", "-1"], ["--timeout must be a positive number"]),
    "timeout_nan": (["--timeout", "nan"], ["--timeout must be a positive number", "nan"]),
    "timeout_inf": (["--timeout", "inf"], ["--timeout must be a positive number", "inf"]),
    "timeout_word": (["--timeout", "soon"], ["--timeout must be a positive number, got soon"]),
    "workers_zero": (["--workers", "0"], ["--workers must be in [1, 1024], got 0"]),
    "limit_zero": (["--limit", "0"], ["--limit must be >= 1"]),
    "limit_negative": (["--limit", "-3"], ["--limit must be >= 1"]),
    "show_wrong_negative": (["--show-wrong", "-1"], ["--show-wrong must be >= 0"]),
    "response_key_absent": (["--response-key", "nope"], ["--response-key 'nope' not in"]),
    "answer_key_path_absent": (["--answer-key", "answer.value"], ["--answer-key 'answer.value' not in"]),
    "unknown_flag": (["--bogus"], ["unrecognized arguments: --bogus"]),
}


@pytest.mark.parametrize("case", FLAG_CASES, ids=str)
def test_score_bad_flags(tmp_path: Path, case: str) -> None:
    flags, words = FLAG_CASES[case]
    inp = write_jsonl(tmp_path / "preds.jsonl", GOOD)
    before = snapshot(tmp_path)
    assert_one_line_error(score(inp, *flags), *words)
    assert snapshot(tmp_path) == before
