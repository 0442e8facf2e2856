"""Helpers of the bad-input tests: run an entry point as a user would, snapshot files, and check
that a refusal is exactly one line on stderr with the right exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MB = 1 << 20
GOOD = {"response": "plan</EXPLORATION><EXECUTION>\\boxed{2}</EXECUTION>", "answer": "2"}
# A place no process can create files in, whatever its user (root ignores permission bits).
UNWRITABLE = Path("/sys/kernel")


def skip_without_unwritable(case: str) -> None:
    if "unwritable" in case and not UNWRITABLE.is_dir():
        pytest.skip(f"{UNWRITABLE} is not here")


def run(*args: str, env: dict[str, str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """A command line as a user types it, from the repository root."""
    cmd = ["bash", *args] if args[0].endswith((".sh", ".sbatch")) else [sys.executable, *args]
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=full_env, timeout=timeout)


def score(*args: str | Path, timeout: int = 120) -> subprocess.CompletedProcess:
    return run("-m", "e2c.eval.score", *map(str, args), timeout=timeout)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (or ``root`` itself) with its bytes; links are not followed."""
    files = (
        [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    )
    return {str(p): p.read_bytes() for p in files}


def assert_one_line_error(r: subprocess.CompletedProcess, *needles: str, code: int = 2) -> str:
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1, r.stderr[-2000:]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def write_jsonl(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def make_dir(p: Path) -> Path:
    """A folder holding an earlier result (which a refused command must leave as it was)."""
    p.mkdir()
    (p / "earlier.jsonl").write_text('{"row": 0}\n')
    return p


def touch(p: Path) -> Path:
    """A plain file with content (which a refused command must leave as it was)."""
    p.write_text("keep me\n")
    return p
