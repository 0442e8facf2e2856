"""Fail cleanly, lose nothing: bad input to the data scripts (eval and prepare with a bad
``--data-dir``, prepare's and download's flags): exit status 2 (1 for a failed prepare step), exactly one
line on stderr naming the problem, no traceback, every file that existed before byte-identical.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from bad_input import (
    UNWRITABLE,
    assert_one_line_error,
    make_dir,
    run,
    skip_without_unwritable,
    snapshot,
    touch,
)


# -------------------------------------------------------------------------- eval and prepare: --data-dir
@pytest.fixture
def bad_data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "benchmarks"
    d.mkdir()
    (d / "gsm8k.jsonl").write_bytes(
        b'{"question": "1+1?", "answer": "#### 2"}\n{"question": "caf\xe9", "answer": "1"}\n'
    )
    return d


def test_eval_names_a_non_utf8_benchmark_file(bad_data_dir: Path, tiny_path: str) -> None:
    r = run(
        "-m",
        "e2c.eval.run",
        "--model",
        "tiny",
        "--dataset",
        "gsm8k",
        "--data-dir",
        str(bad_data_dir),
        "--no-hub",
        "--limit",
        "1",
        "--save-path",
        str(bad_data_dir.parent / "run"),
    )
    assert_one_line_error(r, "gsm8k.jsonl:2", "not UTF-8")
    assert not (bad_data_dir.parent / "run").exists()


def test_prepare_names_a_non_utf8_benchmark_file(bad_data_dir: Path, tmp_path: Path) -> None:
    # Was a UnicodeDecodeError traceback (and, once caught, the file was silently "no local copy").
    before = snapshot(bad_data_dir)
    r = run(
        "scripts/prepare_all_data.sh",
        "--skip-download",
        "--synthetic",
        "0",
        "--data-dir",
        str(bad_data_dir),
        "--raw",
        str(tmp_path / "raw"),
        "--out",
        str(tmp_path / "out"),
    )
    line = assert_one_line_error(r, "FAILED eval gsm8k", "gsm8k.jsonl:2", "not UTF-8", code=1)
    assert line.startswith("FAILED")
    assert snapshot(bad_data_dir) == before


# -------------------------------------------------------------------------------------- prepare: flags
PREPARE_CASES = {
    "out_is_a_file": (
        lambda d: ["--out", str(touch(d / "processed"))],
        ["--out", "processed exists and is not a folder"],
    ),
    "out_under_a_file": (
        lambda d: ["--out", str(touch(d / "plain") / "processed")],
        ["is a file, not a folder"],
    ),
    "out_unwritable": (
        lambda d: ["--out", str(UNWRITABLE / "e2c")],
        ["--out", "cannot write in /sys/kernel"],
    ),
    "raw_is_a_file": (lambda d: ["--raw", str(touch(d / "raw"))], ["--raw", "is a file, not a folder"]),
    "raw_is_a_file_with_download": (
        lambda d: ["--raw", str(touch(d / "raw")), "--download"],
        ["--raw", "is a file"],
    ),
    "raw_unwritable_with_download": (
        lambda d: ["--raw", str(UNWRITABLE / "raw"), "--download"],
        ["--raw", "cannot write in"],
    ),
    "endpoint_not_a_url": (
        lambda d: ["--endpoint", "hub.example", "--download"],
        ["--endpoint 'hub.example' is not an http(s) URL"],
    ),
    "data_dir_is_a_file": (
        lambda d: ["--data-dir", str(touch(d / "bench"))],
        ["--data-dir", "not a folder"],
    ),
    "data_dir_missing": (lambda d: ["--data-dir", str(d / "none")], ["--data-dir", "none does not exist"]),
    "synthetic_negative": (lambda d: ["--synthetic", "-1"], ["--synthetic must be >= 0"]),
    "synthetic_not_a_number": (
        lambda d: ["--synthetic", "many"],
        ["--synthetic must be a whole number >= 0, got many"],
    ),
    "val_frac_nan": (lambda d: ["--val-frac", "nan"], ["--val-frac must be a finite number", "got nan"]),
    "reg_frac_one": (lambda d: ["--reg-frac", "1"], ["must be in [0, 1)"]),
    "unknown_flag": (lambda d: ["--datasets", "eval"], ["unrecognized arguments: --datasets eval"]),
    "tokenizer_unknown": (
        lambda d: ["--tokenizer", "nope", "--synthetic", "5"],
        ["--tokenizer unknown model 'nope'"],
    ),
    "tokenizer_not_a_model": (
        lambda d: ["--tokenizer", str(make_dir(d / "tok")), "--synthetic", "5"],
        ["--tokenizer", "no config.json"],
    ),
}


@pytest.mark.parametrize("case", PREPARE_CASES, ids=str)
def test_prepare_bad_input(tmp_path: Path, case: str) -> None:
    skip_without_unwritable(case)
    make, words = PREPARE_CASES[case]
    flags = make(tmp_path)
    download = "--download" in flags
    flags = [f for f in flags if f != "--download"]
    base = [
        "--synthetic",
        "0",
        "--raw",
        str(tmp_path / "raw-default"),
        "--out",
        str(tmp_path / "out-default"),
    ]
    if not download:
        base.append("--skip-download")
    before = snapshot(tmp_path)
    # Flags given later win, so the case's own --out/--raw replace the defaults.
    r = run("scripts/prepare_all_data.sh", *base, *flags, env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert_one_line_error(r, *words)
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "out-default").exists() and not (tmp_path / "raw-default").exists()


# ------------------------------------------------------------------------------------ download: flags
class BrokenHub(http.server.BaseHTTPRequestHandler):
    """A server at the endpoint that is not the hub: an HTML page, an error object, a 404."""

    def log_message(self, *a: object) -> None:
        pass

    def do_GET(self) -> None:
        repo = "/".join(self.path.split("?")[0].split("/")[3:5])  # /api/datasets/<owner>/<name>/tree/...
        body = {
            "html/repo": b"<html>proxy login</html>",
            "object/repo": b'{"error": "Repository not found"}',
            "records/repo": b'[{"type": "file"}]',
            "escape/repo": b'[{"type": "file", "path": "evaluation/../../escape.parquet", "size": 1}]',
        }.get(repo)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def broken_hub() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), BrokenHub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


DOWNLOAD_CASES = {
    "unknown_dataset": (["--dataset", "evals"], ["invalid choice: 'evals'"]),
    "endpoint_not_a_url": (
        ["--endpoint", "huggingface.co"],
        ["--endpoint 'huggingface.co' is not an http(s) URL"],
    ),
    "endpoint_with_space": (["--endpoint", "http://hub example"], ["is not an http(s) URL"]),
    "repo_not_an_id": (["--repo", "bad repo"], ["--repo 'bad repo' is not a repository id"]),
    "revision_empty": (["--revision", " "], ["--revision must be a non-empty text"]),
    "out_is_a_file": (["--out", "{tmp}/raw"], ["--out", "raw exists and is not a folder"]),
    "out_under_a_file": (["--out", "{tmp}/raw/sub"], ["is a file, not a folder"]),
    "out_unwritable": (["--out", str(UNWRITABLE / "raw")], ["cannot write in /sys/kernel"]),
    "hub_answers_html": (["--repo", "html/repo"], ["did not return the hub's file list"]),
    "hub_answers_an_error_object": (["--repo", "object/repo"], ["did not return the hub's file list"]),
    "hub_records_without_path": (["--repo", "records/repo"], ["did not return the hub's file list"]),
    "hub_404": (["--repo", "no/such"], ["listing no/such failed with HTTP 404"]),
    "hub_path_climbs_out": (
        ["--repo", "escape/repo"],
        ["names a file outside the repository", "../escape.parquet"],
    ),
    "hub_unreachable": (["--endpoint", "http://127.0.0.1:9"], ["cannot reach http://127.0.0.1:9"]),
}


@pytest.mark.parametrize("case", DOWNLOAD_CASES, ids=str)
def test_download_bad_input(tmp_path: Path, broken_hub: str, case: str) -> None:
    skip_without_unwritable(case)
    flags, words = DOWNLOAD_CASES[case]
    touch(tmp_path / "raw")
    flags = [f.format(tmp=tmp_path) for f in flags]
    base = ["--endpoint", broken_hub, "--out", str(tmp_path / "dl")]
    before = snapshot(tmp_path)
    assert_one_line_error(run("scripts/download_datasets.sh", *base, *flags), *words)
    assert snapshot(tmp_path) == before


def test_download_bad_hf_endpoint_env(tmp_path: Path) -> None:
    r = run(
        "scripts/download_datasets.sh", "--out", str(tmp_path / "dl"), env={"HF_ENDPOINT": "ftp://mirror"}
    )
    assert_one_line_error(r, "HF_ENDPOINT 'ftp://mirror' is not an http(s) URL")
