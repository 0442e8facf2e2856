"""Entry of a :class:`e2c.rewards.pool.HardTimeoutPool` worker process (not imported by the package)."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from e2c.rewards.pool import CallError, _read, _resolve, _write


def _exit_with_parent(every_s: float = 1.0) -> None:
    """End this worker when its caller is gone. A caller killed outright (SIGKILL, a time limit, OOM)
    cannot kill its workers, and a worker in the middle of a call does not read stdin, so it would not see
    the pipe close: a pathological symbolic check would then run on, orphaned, for hours and gigabytes."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(every_s)
            if os.getppid() != parent:  # re-parented: the caller died
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _serve(target: str) -> None:
    """Worker loop: read argument tuples on stdin, answer on stdout."""
    _exit_with_parent()
    out = sys.stdout.buffer
    # Anything the callee prints must not corrupt the protocol stream.
    sys.stdout = sys.stderr
    fn = _resolve(target)
    inp = sys.stdin.buffer.fileno()
    while True:
        try:
            args = _read(inp)
        except (EOFError, OSError):
            return
        if args == ():
            _write(out, "pong")
            continue
        try:
            res: Any = fn(*args)
        except Exception as e:  # the callee's failure is data for the caller
            res = CallError(f"{type(e).__name__}: {e}")
        try:
            _write(out, res)
        except (BrokenPipeError, OSError):
            return


if __name__ == "__main__":
    _serve(sys.argv[1])
