"""Run a Python module as a child process forked from this one, where that is safe.

A forked child starts at once with what the parent imported (the RL launcher has imported verl for its
checks; a fresh interpreter would import it again). The child runs the module as ``python -m`` would
(``__main__``, its ``sys.argv``, default SIGINT and SIGTERM, its own ``atexit`` handlers) and nothing of the
parent's: the parent's exit handlers are dropped and the child leaves with ``os._exit``, so no ``finally`` of
the parent (a run folder's lock) runs in it; the caller names what the child must still do (``cleanups``, such
as ray's shutdown). Not forked (:func:`fork_refusal`): no ``fork``, other Python threads, or CUDA initialised.
Environment variables that libraries read at import must be set before the parent imports them.
More: docs/training.md, "On GPUs and on a CPU".
"""

from __future__ import annotations

import atexit
import logging
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

# Seconds a forked child has to stop after SIGINT (its ``finally`` blocks, ray's shutdown) before SIGKILL.
STOP_GRACE_S = 60.0


def fork_refusal() -> str | None:
    """Why this process should not fork a child that goes on running Python (None when it may)."""
    if not hasattr(os, "fork"):
        return "this platform has no fork"
    if threading.active_count() > 1:
        return f"{threading.active_count()} Python threads run"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialized"
    return None


def _exit_code(e: SystemExit) -> int:
    """``sys.exit``'s argument as the interpreter turns it into an exit status (a message: printed, 1)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def set_environ(env: Mapping[str, str]) -> None:
    """Make this process's environment ``env`` (variables it lacks are removed)."""
    for key in set(os.environ) - set(env):
        del os.environ[key]
    os.environ.update(env)


def _child(
    module: str,
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    cleanups: Sequence[Callable[[], None]],
    mask: set[signal.Signals],
) -> NoReturn:
    """The forked child: ``python -m module args`` in ``cwd`` with ``env``; never returns into the parent's
    stack. SIGINT and SIGTERM arrive blocked (``mask``: the parent's), so none lands before this ``try``."""
    code = 1
    try:
        atexit._clear()  # the parent's handlers are the parent's (they run when it exits)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        set_environ(env)
        os.chdir(cwd)
        sys.path.insert(0, str(cwd))  # as ``python -m`` puts its working directory first
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = _exit_code(e)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            # Leaving: a second Ctrl-C (or the parent's stop_child after a first one) must not cut the cleanups
            # short, ray's shutdown among them; the parent's SIGKILL still ends a child that hangs here.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            # As the interpreter ends: the threads the module started that are not daemons finish first.
            for thread in threading.enumerate():
                if thread is not threading.main_thread() and not thread.daemon:
                    thread.join()
            for cleanup in cleanups:
                try:
                    cleanup()
                except BaseException:
                    traceback.print_exc()
            atexit._run_exitfuncs()  # what the module registered while it ran
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _wait(pid: int) -> int:
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        return os.waitstatus_to_exitcode(status)


def run_module(
    module: str,
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    fork: bool = True,
    cleanups: Sequence[Callable[[], None]] = (),
) -> int:
    """``python -m module args`` in ``cwd`` with the environment ``env`` as a child process; its exit status
    (a signal's: negative).

    Forked from this process when ``fork`` allows it and :func:`fork_refusal` has nothing against it, else a
    fresh interpreter. A forked child sets ``env`` as it starts, but what a library read from the
    environment when this process imported it stays as read: set such variables here first. ``cleanups``:
    what a forked child runs before it leaves, in order (the module docstring). As with
    ``subprocess.call``, an exception here while the child runs (Ctrl-C; SIGTERM where this process turns
    it into one) stops the child first (:func:`stop_child`)."""
    if not fork or fork_refusal() is not None:
        proc = subprocess.Popen([sys.executable, "-m", module, *args], env=dict(env), cwd=cwd)
        try:
            return proc.wait()
        except BaseException:
            stop_child(proc.pid, ended=lambda seconds: _popen_ended(proc, seconds))
            raise
    sys.stdout.flush()
    sys.stderr.flush()
    # Blocked across the fork: a Ctrl-C in between would otherwise run the parent's handlers in the child.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    pid = os.fork()
    if pid == 0:
        _child(module, args, cwd, env, cleanups, mask)
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return _wait(pid)
    except BaseException:
        stop_child(pid)
        raise


def _reaped(pid: int, seconds: float) -> bool:
    """Whether the child ``pid`` has ended (and is reaped) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _popen_ended(proc: subprocess.Popen, seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def stop_child(pid: int, grace_s: float = STOP_GRACE_S, ended: Callable[[float], bool] | None = None) -> None:
    """Stop a forked child the way Ctrl-C stops it: SIGINT, so that the module's ``finally`` blocks and the
    ``cleanups`` run (ray's shutdown stops the cluster the child started, which a SIGKILL would leave running),
    then SIGKILL after ``grace_s``. Another SIGINT or SIGTERM to this process meanwhile waits: the stop is not
    cut short. ``ended(seconds)``: whether the child ended within that time (default: reaped by pid)."""
    ended = ended or (lambda seconds: _reaped(pid, seconds))
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGKILL, 30.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
            if ended(wait):
                return
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
