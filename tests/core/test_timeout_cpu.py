"""Hard time limits: a pathological input returns within its bound, from any thread or process."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

from e2c.rewards import grade
from e2c.rewards.math_equiv import default_pool
from e2c.rewards.pool import CallError, CallTimeout, HardTimeoutPool

# sympy tries to evaluate this tower exactly and never returns.
PATHOLOGICAL = "\\boxed{9^{9^{9^{9}}}}"


def test_pathological_input_returns_within_bound() -> None:
    default_pool().warm_up()
    for bound in (1.0, 2.0):
        t = time.monotonic()
        res = grade(PATHOLOGICAL, "1", timeout=bound)
        took = time.monotonic() - t
        assert res.reason == "timeout" and not res.correct and res.score == 0.0
        assert took < bound + 0.5, took
    # The pool replaced the killed worker and still grades.
    assert grade("\\boxed{x^2+2x}", "x(x+2)").correct


def test_pool_kills_a_stuck_call_and_recovers() -> None:
    pool = HardTimeoutPool("time:sleep", workers=1)
    try:
        t = time.monotonic()
        assert isinstance(pool.call((30,), 0.5), CallTimeout)
        assert time.monotonic() - t < 1.5
        assert pool.call((0,), 5) is None  # time.sleep returns None: the replacement worker answers
        assert pool.timeouts == 1
        err = pool.call(("not a number",), 5)
        assert isinstance(err, CallError) and "TypeError" in err.message
    finally:
        pool.close()


def test_grading_from_threads() -> None:
    out: list = []

    def work() -> None:
        out.append(grade(PATHOLOGICAL, "1", timeout=1.0).reason)
        out.append(grade("\\boxed{\\{1,2\\}}", "\\{2,1\\}").correct)

    threads = [threading.Thread(target=work) for _ in range(3)]
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert time.monotonic() - t < 10
    assert out.count("timeout") == 3 and out.count(True) == 3


def _in_daemon(q) -> None:  # runs in a daemonic multiprocessing child, which may not fork children
    t = time.monotonic()
    r = grade(PATHOLOGICAL, "1", timeout=1.0)
    q.put((r.reason, time.monotonic() - t, grade("\\boxed{2^{10}}", "1024").correct))


def test_grading_from_a_daemonic_process() -> None:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_in_daemon, args=(q,), daemon=True)
    p.start()
    reason, took, ok = q.get(timeout=120)
    p.join(10)
    assert reason == "timeout" and ok
    assert took < 1.0 + 5.0  # bound plus one worker start inside the child


def test_a_worker_does_not_outlive_a_killed_caller() -> None:
    """A caller killed outright (SIGKILL: a time limit, the OOM killer) cannot stop its workers; a worker in
    the middle of a call must notice on its own and end (an orphaned pathological check once ran on for
    hours and grew to 16 GB)."""
    import os
    import signal
    import subprocess
    import sys

    code = (
        "import os, sys\n"
        "from e2c.rewards.pool import HardTimeoutPool\n"
        "pool = HardTimeoutPool('time:sleep', workers=1)\n"
        "pool.warm_up()\n"
        "print(pool._idle.queue[0].proc.pid, flush=True)\n"
        "pool.call((120,), timeout=300)\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    worker = int(caller.stdout.readline())
    time.sleep(0.5)  # the worker is inside its 120 s call now
    os.kill(caller.pid, signal.SIGKILL)
    caller.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(worker, signal.SIGKILL)
    raise AssertionError("the worker outlived its killed caller by 10 s")
