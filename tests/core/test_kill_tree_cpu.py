"""The tests' cleanup of a killed run (``conftest.kill_tree``): a process group's kill misses a child that
started a session of its own (torchrun's workers do); the tree kill does not."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from conftest import descendants, ended, kill_tree

# A parent in its own group whose child starts a new session (as torchrun starts a worker), then both wait.
PROGRAM = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
print(child.pid, flush=True)
time.sleep(120)
"""


def test_kill_tree_reaches_a_child_in_a_session_of_its_own_cpu() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert os.getsid(child) == child != os.getpgid(parent.pid)  # out of the parent's group
        assert descendants(parent.pid) == [child]
        assert parent.pid in descendants(os.getpid())
        kill_tree(parent.pid)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while not ended(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ended(child), "the child in its own session outlived the tree kill"
    finally:
        for pid in (child, parent.pid):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        parent.wait()
