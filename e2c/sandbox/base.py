"""The sandbox's types and settings: what a run may use, what it returns, and the checked backend setting.

Kept apart from :mod:`e2c.sandbox` (which builds backends) so that the backends import these without
importing the package that imports them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from e2c.core.errors import UserError

SANDBOX_ENV = "E2C_SANDBOX"
WORKERS_ENV = "E2C_SANDBOX_WORKERS"
BACKENDS = ("local", "bwrap", "fusion:URL")
SANDBOX_HELP = (
    "where programs run: local (namespaces, an unprivileged user, rlimits), bwrap (bubblewrap: also a "
    "read-only root and private /tmp) or fusion:URL (a SandboxFusion server); default $E2C_SANDBOX or local"
)


@dataclass(frozen=True)
class Limits:
    """What one run may use. ``wall_s`` is a hard kill of the whole process tree; ``cpu_s`` the CPU-time
    rlimit (default: the wall limit plus one second); ``file_mb`` bounds every file the program writes,
    its standard output included (a longer output is killed: status ``output_limit``)."""

    wall_s: float = 10.0
    memory_mb: int = 1024
    cpu_s: float | None = None
    file_mb: int = 16
    nofile: int = 64
    nproc: int = 32

    @property
    def cpu(self) -> int:
        return int(self.cpu_s if self.cpu_s is not None else self.wall_s + 1) + 1

    def with_wall(self, wall_s: float) -> Limits:
        return replace(self, wall_s=wall_s)


STATUSES = ("ok", "exit", "timeout", "output_limit", "memory", "sandbox_error")


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run.

    ``status``: ``ok`` (exit 0), ``exit`` (another exit code or a signal), ``timeout`` (killed at the wall
    limit), ``output_limit`` (wrote more than the file-size limit), ``memory`` (a MemoryError), or
    ``sandbox_error`` (the sandbox failed; ``stderr`` says why). ``stdout`` is the whole output (bounded
    by the file-size limit), ``stderr`` its last 4 kB."""

    status: str
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float


class Sandbox(Protocol):
    """A backend: :meth:`run` never raises on the program's behaviour."""

    name: str

    def run(self, files: Mapping[str, str], main: str, stdin: str, limits: Limits) -> RunResult: ...

    def describe(self) -> str:
        """One line: what this backend isolates here, and what it does not."""
        ...


@dataclass(frozen=True)
class SandboxSpec:
    """A checked ``--sandbox`` value: the backend's name and, for fusion, its URL."""

    backend: str
    url: str = ""

    def __str__(self) -> str:
        return f"fusion:{self.url}" if self.backend == "fusion" else self.backend


def parse_spec(value: str | None, where: str = "--sandbox") -> SandboxSpec:
    """Check a backend setting where it enters (a flag, ``$E2C_SANDBOX``); one line naming the choices.

    >>> parse_spec("local"), parse_spec("http://h:8080").url, parse_spec("fusion:http://h:8080/").url
    (SandboxSpec(backend='local', url=''), 'http://h:8080', 'http://h:8080')
    """
    v = (value or "local").strip()
    if v in ("local", "bwrap"):
        return SandboxSpec(v)
    url = v[len("fusion:") :] if v.startswith("fusion:") else v
    if url.startswith(("http://", "https://")) and len(url) > len("http://"):
        return SandboxSpec("fusion", url.rstrip("/"))
    raise UserError(f"{where} {value!r} is not a sandbox; valid: {', '.join(BACKENDS)}")


MAX_WORKERS = 4096
"""The most programs one process may run at once (``$E2C_SANDBOX_WORKERS``): more is a typo."""


def workers_setting(value: str | None = None) -> int:
    """How many programs run at once (``$E2C_SANDBOX_WORKERS``; default: the CPU count): a whole number from
    1 to :data:`MAX_WORKERS`, else one line naming the variable and its value. Entry points check it where it
    enters (:func:`e2c.sandbox.setting`), so a worker that reads it later never finds a bad one.

    >>> workers_setting("3"), workers_setting("") >= 1
    (3, True)
    >>> workers_setting("many")
    Traceback (most recent call last):
    ...
    e2c.core.errors.UserError: $E2C_SANDBOX_WORKERS 'many' is not a positive whole number of concurrent programs (1 to 4096; unset: the CPU count)
    """
    v = os.environ.get(WORKERS_ENV) if value is None else value
    if not v:
        return max(1, os.cpu_count() or 1)
    text = v.strip()
    n = int(text) if text.isascii() and text.isdigit() else 0
    if not 1 <= n <= MAX_WORKERS:
        raise UserError(
            f"${WORKERS_ENV} {v!r} is not a positive whole number of concurrent programs "
            f"(1 to {MAX_WORKERS}; unset: the CPU count)"
        )
    return n
