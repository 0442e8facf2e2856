"""Entry of a :class:`e2c.rewards.pool.HardTimeoutPool` worker process (not imported by the package)."""

from __future__ import annotations

import sys
from typing import Any

from e2c.rewards.pool import CallError, _read, _resolve, _write


def _serve(target: str) -> None:
    """Worker loop: read argument tuples on stdin, answer on stdout."""
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
