"""A small process pool whose calls have a hard time limit.

Each worker is a separate Python process (``python -m e2c.rewards._worker <module:function>``) reading
pickled argument tuples on stdin and writing pickled results on stdout; a call that does not answer within
its bound gets its worker killed and replaced, and the caller a :class:`CallTimeout` instead of a hang
(``concurrent.futures`` cannot stop a stuck task; ``signal.alarm`` fails off the main thread). Workers are
plain subprocesses, not ``multiprocessing`` children, so they never re-import the caller's ``__main__`` and
can be started from daemonic processes. Thread-safe (a call borrows one idle worker) and fork-safe (a forked
child builds its own workers).
More: docs/chain-format-and-grader.md, "The grader".
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO

_HEADER = struct.Struct("!I")
_START_TIMEOUT = 120.0


@dataclass(frozen=True)
class CallTimeout:
    """Returned instead of a value when a call ran past its bound."""

    seconds: float


@dataclass(frozen=True)
class CallError:
    """Returned instead of a value when the callee raised or its worker died."""

    message: str


def _write(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(fd: int, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError("worker closed its pipe")
        buf += chunk
    return bytes(buf)


def _read(fd: int) -> Any:
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    return pickle.loads(_read_exact(fd, n))


def _resolve(target: str) -> Callable[..., Any]:
    mod, _, name = target.partition(":")
    return getattr(importlib.import_module(mod), name)


class _Worker:
    def __init__(self, target: str) -> None:
        env = dict(os.environ)
        # The worker must import this package even when the caller runs from another directory.
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "e2c.rewards._worker", target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._out = self.proc.stdout.fileno()

    def call(self, args: tuple, timeout: float) -> tuple[bool, Any]:
        _write(self._in, args)
        ready, _, _ = select.select([self._out], [], [], timeout)
        if not ready:
            return False, None
        return True, _read(self._out)

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except Exception:
                pass


class HardTimeoutPool:
    """Run ``fn(*args)`` in worker processes; each call returns within its timeout.

    Args:
        target: ``"package.module:function"``, a module-level function the workers import.
        workers: number of worker processes (started lazily; a worker's first start costs the import
            time of the target's module, about 1 s for math-verify).
    """

    def __init__(self, target: str, workers: int = 1) -> None:
        _resolve(target)  # fail now, in the caller, if the target does not exist
        self.target = target
        self.size = max(1, workers)
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._started = 0
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self.timeouts = 0
        atexit.register(self.close)

    def _borrow(self) -> _Worker:
        with self._lock:
            if self._idle.empty() and self._started < self.size:
                self._started += 1
                create = True
            else:
                create = False
        if not create:
            return self._idle.get()
        try:
            w = _Worker(self.target)
            # Wait for the import outside any call's time bound, so a slow start is not a timeout.
            ok, _ = w.call((), _START_TIMEOUT)
        except Exception:
            with self._lock:
                self._started -= 1
            raise
        if not ok:
            self._retire(w)
            raise RuntimeError(f"grader worker for {self.target} did not start in {_START_TIMEOUT:.0f} s")
        return w

    def _retire(self, w: _Worker) -> None:
        w.kill()
        with self._lock:
            self._started -= 1

    def call(self, args: tuple, timeout: float) -> Any:
        """``fn(*args)``, or :class:`CallTimeout` / :class:`CallError`. Never raises for the callee.

        The bound covers the call itself; a fresh worker's start is waited for separately (use
        :meth:`warm_up` to pay it up front).
        """
        try:
            w = self._borrow()
        except (RuntimeError, OSError) as e:
            return CallError(f"no worker: {e}")
        try:
            ok, out = w.call(args, timeout)
        except (BrokenPipeError, EOFError, OSError, pickle.UnpicklingError) as e:
            self._retire(w)
            return CallError(f"worker died: {type(e).__name__}")
        if not ok:
            self._retire(w)
            self.timeouts += 1
            return CallTimeout(timeout)
        self._idle.put(w)
        return out

    def map(self, arg_list: Iterable[tuple], timeout: float) -> list[Any]:
        """:meth:`call` over many argument tuples using all workers; results keep the input order."""
        items = list(arg_list)
        if len(items) <= 1 or self.size == 1:
            return [self.call(a, timeout) for a in items]
        out: list[Any] = [None] * len(items)
        nxt = iter(range(len(items)))
        lock = threading.Lock()

        def run() -> None:
            while True:
                with lock:
                    i = next(nxt, None)
                if i is None:
                    return
                out[i] = self.call(items[i], timeout)

        threads = [threading.Thread(target=run, daemon=True) for _ in range(min(self.size, len(items)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def warm_up(self) -> None:
        """Start every worker now and wait until each has imported its target."""
        ws = []
        while self._started < self.size:
            ws.append(self._borrow())
        for w in ws:
            self._idle.put(w)

    def close(self) -> None:
        """Stop all idle workers (called at exit)."""
        if os.getpid() != self._pid:
            return
        while True:
            try:
                w = self._idle.get_nowait()
            except queue.Empty:
                break
            self._retire(w)
