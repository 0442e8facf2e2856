"""The bubblewrap backend: the local backend's limits and user, inside ``bwrap``.

Beyond :mod:`e2c.sandbox.local`: every namespace bwrap can make (user, network, PID, IPC, UTS, cgroup), a
read-only view of the host's root, private empty ``/tmp``, ``/var/tmp``, ``/dev/shm`` and ``/run/lock``, a minimal
``/dev``, its own ``/proc``; the program's folder is the only writable place, and the tree dies with its
caller (``--die-with-parent``) and never shares the caller's terminal session (``--new-session``).

What it does not do: the host's files stay readable where their permissions allow (the root is bound
read-only, not hidden); CPU and memory are bounded per process by rlimits, not for the tree (no cgroups).
Needs the ``bwrap`` binary (Debian: ``apt-get install bubblewrap``) and user namespaces for an
unprivileged caller (as root, the run drops to a uid of its own before bwrap starts).
"""

from __future__ import annotations

import shutil
import subprocess

from e2c.errors import UserError
from e2c.sandbox.base import Limits
from e2c.sandbox.local import Isolation, LocalSandbox, existing_private_dirs, limit_args, probe_isolation


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

    def __init__(self, python: str | None = None, isolation: Isolation | None = None) -> None:
        self.bwrap = bwrap_path()
        self.hidden = existing_private_dirs()  # each a private empty tmpfs, as the local backend's
        super().__init__(python, isolation or probe_isolation())
        uid = self._uids.get() if self._uids is not None else None
        probe = self.command(Limits(wall_s=10), uid, ["true"], "/")
        try:
            ok = subprocess.run(probe, capture_output=True, timeout=20)
        except (OSError, subprocess.SubprocessError) as e:
            raise UserError(f"--sandbox bwrap: bubblewrap does not start here ({e}); use local") from None
        finally:
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
        self, limits: Limits, uid: int | None, argv: list[str], work: str = "", fstab: str | None = None
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
            "--ro-bind",
            "/",
            "/",
        ]
        for d in self.hidden:
            cmd += ["--tmpfs", d]
        cmd += ["--dev", "/dev", "--proc", "/proc"]
        if work and work != "/":
            cmd += ["--bind", work, work, "--chdir", work]
        return [*cmd, "--", *argv]
