"""The bwrap backend's lifeline (e2c/sandbox/bwrap.py, GUARD): a caller that dies while bubblewrap sets up its
namespace cannot leave a program running, whatever the timing.

The race itself (the caller killed between bwrap's fork of PID 1 and its parent-death signal) is too narrow to
hit on demand; these tests put the guard in each state that race can leave it in: the caller already gone
before the namespace exists, and gone while the program and a daemon it started run."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import pytest

from e2c.sandbox import Limits, make
from e2c.sandbox.local import probe_isolation

pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap binary (apt-get install bubblewrap)"),
    pytest.mark.skipif(probe_isolation().mode != "root", reason="the per-run users need root"),
]

DAEMON = """\
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open("daemon", "w").write("up")
        time.sleep(60)
    os._exit(0)
time.sleep(60)
"""


def live_processes_of(uid: int) -> list[int]:
    out = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/status") as f:
                st = f.read()
        except OSError:
            continue
        if int(st.split("\nUid:")[1].split()[0]) == uid and st.split("\nState:")[1].split()[0] != "Z":
            out.append(int(d))
    return out


@pytest.fixture
def launch():
    """Start ``program`` in the bwrap chain as a run's user, the lifeline's write end handed to the test."""
    sbx = make("bwrap")
    work = tempfile.mkdtemp(prefix="e2c-lifeline-")
    uid = sbx._uids.get()
    os.chown(work, uid, uid)
    started: list[subprocess.Popen[bytes]] = []

    def start(program: str) -> tuple[subprocess.Popen[bytes], int, int]:
        with open(os.path.join(work, "main.py"), "w") as f:
            f.write(program)
        r, w = os.pipe()
        argv = [sbx.python, "-I", "-B", "main.py"]
        cmd = sbx.command(Limits(wall_s=60), uid, argv, work, lifeline=r)
        proc = subprocess.Popen(cmd, cwd=work, pass_fds=(r,), start_new_session=True, stderr=subprocess.PIPE)
        os.close(r)
        started.append(proc)
        return proc, w, uid

    yield start, work
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    sbx._release(uid)
    shutil.rmtree(work, ignore_errors=True)


def test_a_program_whose_caller_is_gone_never_starts_cpu(launch):
    start, work = launch
    proc, w, uid = start("open('ran', 'w').write('yes')\n")
    os.close(w)  # the caller "died" before bwrap had even built the namespace
    assert proc.wait(timeout=20) == 137, proc.stderr.read().decode()
    assert not os.path.exists(os.path.join(work, "ran"))
    assert live_processes_of(uid) == []


def test_the_lifeline_closing_ends_the_program_and_its_daemons_cpu(launch):
    start, work = launch
    proc, w, uid = start(DAEMON)
    end = time.monotonic() + 20
    while not os.path.exists(os.path.join(work, "daemon")):
        assert time.monotonic() < end and proc.poll() is None, "the daemon never started"
        time.sleep(0.05)
    assert len(live_processes_of(uid)) >= 4  # bwrap outside, the guard (PID 1), program, daemon
    os.close(w)
    assert proc.wait(timeout=10) == 137
    end = time.monotonic() + 5
    while live_processes_of(uid) and time.monotonic() < end:
        time.sleep(0.05)
    assert live_processes_of(uid) == []


def test_the_guard_passes_the_programs_exit_on_cpu(launch):
    start, _ = launch
    for program, code in [
        ("raise SystemExit(3)\n", 3),
        ("import os, signal\nos.kill(os.getpid(), 9)\n", 137),
    ]:
        proc, w, _ = start(program)
        try:
            assert proc.wait(timeout=20) == code
        finally:
            os.close(w)


def test_the_program_cannot_kill_its_guard_cpu(launch):
    """PID 1 ignores signals from inside its namespace: a program that kills everything it can (the code
    judge's driver does, between tests) still gets its exit code back through the guard."""
    start, _ = launch
    proc, w, _ = start(
        "import os\nfor target in (1, -1):\n    try:\n        os.kill(target, 9)\n    except OSError:\n        pass\nraise SystemExit(5)\n"
    )
    try:
        assert proc.wait(timeout=20) == 5
    finally:
        os.close(w)
