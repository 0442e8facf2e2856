"""The one guard around every entry point (e2c/commandline/entry.py), run as a user runs a command: a user error is one
line and exit 2, a bug is one line naming the log file that holds its traceback (exit 1), an interrupt is one
line naming the command that reruns it, and E2C_CHECK_ONLY stops a command once its inputs are checked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = textwrap.dedent(
    """
    import sys, time
    from e2c.commandline.entry import checks_done, run_main
    from e2c.core.errors import UserError

    def main():
        what = sys.argv[1]
        if what == "user":
            raise UserError("--x must be >= 1, got 0")
        checks_done()
        if what == "bug":
            raise ValueError("a bug\\nwith a second line")
        if what == "wait":
            print("started", flush=True)
            time.sleep(60)
        if what == "pipe":
            for i in range(100000):
                print(i)
        return 0

    if __name__ == "__main__":
        run_main(main)
    """
)


@pytest.fixture()
def program(tmp_path: Path) -> Path:
    p = tmp_path / "prog.py"
    p.write_text(PROGRAM)
    return p


def run(program: Path, what: str, **env: str) -> subprocess.CompletedProcess:
    inherited = {k: v for k, v in os.environ.items() if k not in ("E2C_DEBUG", "E2C_CHECK_ONLY")}
    full = {**inherited, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [sys.executable, str(program), what], capture_output=True, text=True, env=full, timeout=60
    )


def test_user_error_is_one_line_exit_2(program: Path) -> None:
    r = run(program, "user")
    assert (r.returncode, r.stderr) == (2, "error: --x must be >= 1, got 0\n")


def test_a_bug_is_one_line_naming_its_log(program: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    r = run(program, "bug", E2C_LOG_DIR=str(logs))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    [line] = r.stderr.splitlines()
    assert line.startswith("error: unexpected ValueError in prog.py: a bug (full traceback in ")
    [log] = logs.iterdir()
    assert str(log) in line and "E2C_DEBUG=1 prints it" in line
    text = log.read_text()
    assert "Traceback" in text and "with a second line" in text and "prog.py bug" in text


def test_a_bug_with_an_unwritable_log_folder_still_says_one_line(program: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run(program, "bug", E2C_LOG_DIR=str(blocker / "logs"))
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr


def test_debug_prints_the_traceback(program: Path, tmp_path: Path) -> None:
    r = run(program, "bug", E2C_DEBUG="1", E2C_LOG_DIR=str(tmp_path))
    assert r.returncode == 1 and "Traceback" in r.stderr and "ValueError: a bug" in r.stderr


def test_check_only_stops_after_the_checks(program: Path) -> None:
    r = run(program, "bug", E2C_CHECK_ONLY="1")
    assert (r.returncode, r.stderr) == (0, "checks passed\n")
    assert run(program, "user", E2C_CHECK_ONLY="1").returncode == 2  # a refusal is still a refusal


def test_sigterm_is_one_line_naming_the_rerun(program: Path) -> None:
    full = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import signal, runpy, sys; from e2c.commandline.parsing import interrupt_on_sigterm; "
            f"interrupt_on_sigterm(); sys.argv = [{str(program)!r}, 'wait']; runpy.run_path(sys.argv[0], run_name='__main__')",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
    )
    assert p.stdout.readline() == "started\n"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143
    [line] = err.splitlines()
    assert line.startswith("interrupted (SIGTERM): ") and "rerun with: cd " in line and "wait" in line


def test_a_closed_pipe_is_quiet(program: Path) -> None:
    full = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, str(program), "pipe"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full
    )
    p.stdout.read(10)
    p.stdout.close()
    start = time.time()
    err = p.stderr.read().decode()
    p.wait(timeout=30)
    assert "Traceback" not in err and err.strip() == "", err
    assert time.time() - start < 30
