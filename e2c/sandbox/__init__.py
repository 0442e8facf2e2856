"""Run untrusted programs (model-written code, tests) out of process: the one sandbox of eval, RL and TTS.

A backend runs a Python program given as files in a fresh folder, with a standard input, under
:class:`Limits`, and returns a :class:`RunResult`. It never raises on the program's behaviour; a failure of
the sandbox itself (a server that does not answer, a tool missing) is the status ``sandbox_error``, which
callers count as an error, never as a wrong answer. Backends (``--sandbox`` / ``$E2C_SANDBOX``, parsed once
by :func:`parse_spec`): ``local`` (the default, :mod:`e2c.sandbox.local`), ``bwrap``
(:mod:`e2c.sandbox.bwrap`) and ``fusion:URL``, a SandboxFusion server (:mod:`e2c.sandbox.fusion`).
More: docs/code.md, "The sandbox: what each backend protects against" (what each does not protect against).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping

from e2c.core.errors import UserError
from e2c.sandbox.base import (
    BACKENDS,
    SANDBOX_ENV,
    SANDBOX_HELP,
    STATUSES,
    WORKERS_ENV,
    Limits,
    RunResult,
    Sandbox,
    SandboxSpec,
    parse_spec,
    workers_setting,
)

__all__ = [
    "BACKENDS",
    "SANDBOX_ENV",
    "SANDBOX_HELP",
    "STATUSES",
    "WORKERS_ENV",
    "Limits",
    "RunResult",
    "Sandbox",
    "SandboxSpec",
    "from_env",
    "given_or_env",
    "make",
    "parse_spec",
    "ready",
    "setting",
    "slots",
    "use",
    "workers_setting",
]


def make(spec: SandboxSpec | str | None = None) -> Sandbox:
    """The backend a spec names (a string is checked first). Building it probes what the machine allows
    (``describe`` says what was found); a missing tool is a :class:`UserError` naming it."""
    if not isinstance(spec, SandboxSpec):
        spec = parse_spec(spec)
    # start-up: a backend's module loads when it is chosen (every grader process imports this package)
    if spec.backend == "local":
        from e2c.sandbox.local import LocalSandbox

        return LocalSandbox()
    if spec.backend == "bwrap":
        from e2c.sandbox.bwrap import BwrapSandbox  # start-up, as local above

        return BwrapSandbox()
    from e2c.sandbox.fusion import FusionSandbox  # urllib and ssl

    return FusionSandbox(spec.url)


_from_env: Sandbox | None = None
_lock = threading.Lock()


def from_env() -> Sandbox:
    """The sandbox ``$E2C_SANDBOX`` names (default local), built once per process: where programs run for a
    caller no command handed one to. That is a process whose setting arrives through the environment (a ray
    reward worker: the RL launcher exports ``--sandbox``; a worker a command starts after :func:`use`), or a
    library caller of :func:`e2c.rewards.grader.grade`. A command builds its own with :func:`use` and passes
    it where programs run."""
    global _from_env
    with _lock:
        if _from_env is None:
            _from_env = make(parse_spec(os.environ.get(SANDBOX_ENV), f"${SANDBOX_ENV}"))
        return _from_env


def given_or_env(sandbox: Sandbox | None) -> Sandbox:
    """``sandbox``, the one a command handed over, else :func:`from_env`'s: the one default every caller
    that may not have been handed one applies."""
    return sandbox if sandbox is not None else from_env()


_slots: threading.BoundedSemaphore | None = None


def slots() -> threading.BoundedSemaphore:
    """The process's bound on concurrent programs (:func:`workers_setting`), shared by every caller."""
    global _slots
    with _lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(workers_setting())
        return _slots


def setting(flag: str | None, env: Mapping[str, str] | None = None) -> SandboxSpec | None:
    """The sandbox a command asks for, checked where it enters: ``--sandbox``, else ``$E2C_SANDBOX``, else
    None (the default, local). One line naming the backends for anything else. ``$E2C_SANDBOX_WORKERS``
    enters here too (:func:`workers_setting`: a whole number from 1, else one line), so every command that
    reads its sandbox setting refuses a bad bound before any work, whatever its data.

    >>> str(setting("http://h:8080", {})), setting(None, {}) is None, str(setting(None, {SANDBOX_ENV: "bwrap"}))
    ('fusion:http://h:8080', True, 'bwrap')
    """
    env = os.environ if env is None else env
    if env.get(WORKERS_ENV):
        workers_setting(env[WORKERS_ENV])
    if flag is not None:
        return parse_spec(flag, "--sandbox")
    if env.get(SANDBOX_ENV):
        return parse_spec(env[SANDBOX_ENV], f"${SANDBOX_ENV}")
    return None


READY_PROGRAM = "print(1)"
READY_WALL_S = 30.0
"""The trivial program a sandbox must run before work starts, and how long it may take (a cold server)."""


def ready(spec: SandboxSpec | None, tries: int = 1, wait_s: float = 2.0, built: Sandbox | None = None) -> str:
    """Run :data:`READY_PROGRAM` through the backend (``built``, else built here; up to ``tries`` times,
    ``wait_s`` apart, for a server that is starting): its description and the run's seconds, or a
    :class:`UserError` in one line naming the backend. A readiness check: a SandboxFusion server that does
    not answer would otherwise turn every code sample into an error minutes into a run."""
    spec = spec or SandboxSpec("local")
    sbx = built if built is not None else make(spec)
    why = ""
    for i in range(tries):
        try:
            r = sbx.run({"main.py": READY_PROGRAM}, "main.py", "", Limits(wall_s=READY_WALL_S))
        except Exception as e:  # a client bug or an unreachable host: one line, not a traceback
            why = f"{type(e).__name__}: {e}"
        else:
            if r.status == "ok" and r.stdout.strip() == "1":
                return f"{sbx.describe()}; {READY_PROGRAM} ran in {r.seconds:.3f} s"
            why = f"{r.status}: " + (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        if i + 1 < tries:
            time.sleep(wait_s)
    raise UserError(
        f"sandbox {spec} (--sandbox or ${SANDBOX_ENV}) did not run {READY_PROGRAM!r} ({why[:300]})"
    )


def use(spec: SandboxSpec | None, log: Callable[[str], None], label: str) -> Sandbox:
    """A command's sandbox: built once (building probes the machine and, for bwrap, starts bubblewrap),
    checked to run a program (:func:`ready`: a server that does not answer is one line before any work),
    said in one line, and returned for the command to pass where programs run. ``spec`` is also exported to
    ``$E2C_SANDBOX``, so that the workers the command starts later (data-parallel evaluation, ray reward
    workers) build the same one (:func:`from_env`)."""
    spec = spec or SandboxSpec("local")
    sbx = make(spec)
    said = ready(spec, built=sbx)
    os.environ[SANDBOX_ENV] = str(spec)
    log(f"[{label}] sandbox {spec}: {said}")
    return sbx
