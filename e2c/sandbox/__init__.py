"""Run untrusted programs (model-written code, tests) out of process: the one sandbox of eval, RL and TTS.

A backend runs a Python program given as files in a fresh folder, with a standard input, under
:class:`Limits`, and returns a :class:`RunResult`. It never raises on the program's behaviour; a failure of
the sandbox itself (a server that does not answer, a tool missing) is the status ``sandbox_error``, which
callers count as an error, never as a wrong answer.

Backends (``--sandbox`` / ``$E2C_SANDBOX``, parsed once by :func:`parse_spec`):

- ``local`` (the default): a separate process in its own session, in new network and PID namespaces, as an
  unprivileged user, with rlimits (:mod:`e2c.sandbox.local`);
- ``bwrap``: the same inside bubblewrap, with a read-only root and private ``/tmp`` (:mod:`e2c.sandbox.bwrap`);
- ``fusion:URL`` (or a bare ``http(s)://`` URL): a SandboxFusion server (:mod:`e2c.sandbox.fusion`), one per
  node on a cluster.

``docs/code.md`` says what each backend protects against and what it does not.
"""

from __future__ import annotations

import os
import threading

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
    "configure",
    "current",
    "make",
    "parse_spec",
    "slots",
    "workers_setting",
]


def make(spec: SandboxSpec | str | None = None) -> Sandbox:
    """The backend a spec names (a string is checked first). Building it probes what the machine allows
    (``describe`` says what was found); a missing tool is a :class:`UserError` naming it."""
    if not isinstance(spec, SandboxSpec):
        spec = parse_spec(spec)
    if spec.backend == "local":
        from e2c.sandbox.local import LocalSandbox

        return LocalSandbox()
    if spec.backend == "bwrap":
        from e2c.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox()
    from e2c.sandbox.fusion import FusionSandbox

    return FusionSandbox(spec.url)


_current: Sandbox | None = None
_current_lock = threading.Lock()


def configure(spec: SandboxSpec | str | None) -> Sandbox:
    """Set the process's sandbox (what :func:`current` returns) and export it to ``$E2C_SANDBOX`` so that
    workers started later (ray actors, reward processes) build the same one."""
    global _current
    sbx = make(spec)
    with _current_lock:
        _current = sbx
    os.environ[SANDBOX_ENV] = str(spec if isinstance(spec, SandboxSpec) else parse_spec(spec))
    return sbx


def current() -> Sandbox:
    """The process's sandbox: the configured one, else the one ``$E2C_SANDBOX`` names (default local),
    built once."""
    global _current
    with _current_lock:
        if _current is None:
            _current = make(parse_spec(os.environ.get(SANDBOX_ENV), f"${SANDBOX_ENV}"))
        return _current


_slots: threading.BoundedSemaphore | None = None


def slots() -> threading.BoundedSemaphore:
    """The process's bound on concurrent programs (:func:`workers_setting`), shared by every caller."""
    global _slots
    with _current_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(workers_setting())
        return _slots
