"""The bubblewrap backend: the local backend's limits and user, inside ``bwrap``.

Adds to :mod:`e2c.sandbox.local`: every namespace bwrap can make, a read-only view of the host's root, private
empty ``/tmp``, ``/var/tmp``, ``/dev/shm`` and ``/run/lock``, a minimal ``/dev``, its own ``/proc``; only the
program's folder is writable, and the tree dies with its caller. PID 1 is a guard (:data:`GUARD`, ``--as-pid-1``)
that starts the program only while a pipe from the caller is open and ends the run at its EOF, since bwrap arms
the parent-death signal only after forking PID 1; it ignores the program's signals. Does not protect: host
files stay readable where their permissions allow, and CPU and memory are bounded per process, not per tree.
Needs ``bwrap`` and, for an unprivileged caller, user namespaces.
More: docs/code.md, "The sandbox: what each backend protects against".
"""

from __future__ import annotations

import os
import shutil
import subprocess

from e2c.core.errors import UserError
from e2c.sandbox.base import Limits
from e2c.sandbox.local import Isolation, LocalSandbox, existing_private_dirs, limit_args, probe_isolation

# PID 1 of the namespace (bwrap ``--as-pid-1``), run as ``python -I -S -c GUARD FD ARGV...``. A pipe whose write
# end no one writes polls readable only at EOF: the caller is gone. PID 1 ignores every signal sent from
# inside its namespace that it has no handler for (SIGKILL included), and its exit makes the kernel kill every
# process of the namespace; so it ends the run at the pipe's EOF, reaps what the program orphans (a daemon
# killed but unreaped would hold one of the run's processes), and exits with the program's status as bwrap
# reports one (128 + the signal). The program (same user, no capabilities) could trace it, but tracing
# cannot stop the SIGKILL of its parent-death signal. ``_signal``, not ``signal``: the latter's enum import
# doubles the guard's start.
GUARD = """\
import _signal as signal, os, select, sys
fd = int(sys.argv[1])
watch = select.poll()
watch.register(fd, select.POLLIN)
if watch.poll(0):
    os._exit(128 + signal.SIGKILL)
wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
pid = os.fork()
if pid == 0:
    os.close(fd)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
watch.register(wake_r, select.POLLIN)
while True:
    for ready, _ in watch.poll():
        if ready == fd:
            os._exit(128 + signal.SIGKILL)
        try:
            os.read(wake_r, 4096)
        except BlockingIOError:
            pass
    while True:
        try:
            child, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            os._exit(1)
        if child == 0:
            break
        if child == pid:
            os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
"""


def bwrap_path() -> str:
    """The ``bwrap`` binary, or a :class:`UserError` saying how to get it."""
    path = shutil.which("bwrap")
    if path is None:
        raise UserError("--sandbox bwrap needs bubblewrap (Debian: apt-get install bubblewrap); or use local")
    return path


class BwrapSandbox(LocalSandbox):
    """:class:`~e2c.sandbox.local.LocalSandbox` with the program inside bubblewrap."""

    name = "bwrap"
    private_pids = True  # bwrap always makes a PID namespace (``--unshare-all``)
    ends_with_its_namespace = False  # bwrap's outer process may exit before its namespace is empty: check
    uses_lifeline = True

    def __init__(self, python: str | None = None, isolation: Isolation | None = None) -> None:
        self.bwrap = bwrap_path()
        self.hidden = existing_private_dirs()  # each a private empty tmpfs, as the local backend's
        super().__init__(python, isolation or probe_isolation())
        uid = self._uids.get() if self._uids is not None else None
        lifeline, alive = os.pipe()
        probe = self.command(Limits(wall_s=10), uid, ["true"], "/", lifeline=lifeline)
        try:
            ok = subprocess.run(probe, capture_output=True, timeout=20, pass_fds=(lifeline,))
        except (OSError, subprocess.SubprocessError) as e:
            raise UserError(f"--sandbox bwrap: bubblewrap does not start here ({e}); use local") from None
        finally:
            os.close(lifeline)
            os.close(alive)
            if uid is not None:  # the probe ran as a run's user: nothing of it may be left when a run starts
                self._release(uid)
        if ok.returncode != 0:
            why = ok.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            raise UserError(f"--sandbox bwrap: bubblewrap does not start here ({why[0]}); use local")

    def describe(self) -> str:
        return (
            "bwrap: user, network, PID, IPC and UTS namespaces, read-only root, private /tmp, an unprivileged "
            "user, rlimits, wall-clock kill; not isolated: reading world-readable host files"
        )

    def command(
        self,
        limits: Limits,
        uid: int | None,
        argv: list[str],
        work: str = "",
        fstab: str | None = None,
        lifeline: int | None = None,
    ) -> list[str]:
        # bwrap makes its own mounts (``fstab`` is the local backend's).
        cmd = [*limit_args(self.iso.prlimit, limits), self.iso.setpriv, "--pdeathsig", "KILL"]
        if uid is not None:
            cmd += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--nnp"]
        cmd += [
            "--",
            self.bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            *(["--as-pid-1"] if lifeline is not None else []),
            "--ro-bind",
            "/",
            "/",
        ]
        for d in self.hidden:
            cmd += ["--tmpfs", d]
        cmd += ["--dev", "/dev", "--proc", "/proc"]
        if work and work != "/":
            cmd += ["--bind", work, work, "--chdir", work]
        if lifeline is not None:
            argv = [self.python, "-I", "-S", "-c", GUARD, str(lifeline), *argv]
        return [*cmd, "--", *argv]
