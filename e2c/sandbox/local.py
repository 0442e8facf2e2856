"""The local sandbox: each program a separate process tree, isolated with the kernel's own tools.

A run, in order (every step is a util-linux tool that execs the next, so no Python runs between the
caller's fork and the program, and nothing here needs a thread-unsafe ``preexec_fn``):

1. a fresh folder holds the program's files; its standard input, output and error are files in another
   folder the program cannot name (output is read back by the caller, up to the file-size limit);
2. ``prlimit`` sets the rlimits: address space, CPU time, file size (which also bounds standard output:
   a program that prints more is killed by SIGXFSZ), open files, processes, no core files;
3. ``setpriv --pdeathsig KILL`` then ``unshare --net --pid --fork --kill-child``: new network and PID
   namespaces (no interface but a down loopback; the program is PID 1 of its namespace, so when it exits
   or is killed the kernel kills every process it left, daemons that left its session included), and the
   whole tree dies with the caller;
4. as root, ``setpriv --reuid U`` drops to an unprivileged user of its own (a uid per concurrent run, so
   the process limit of one run never counts another's), no supplementary groups, no new privileges;
   without root, ``unshare --user --map-root-user`` makes the namespaces where the kernel allows it;
5. the caller waits up to the wall limit, then kills the process group (and so the namespace).

What it does not do (use ``bwrap``, or a SandboxFusion server, for more): the file system is the host's,
read as an unprivileged user: the program can read world-readable files, and write where anyone may
(``/tmp``, ``/dev/shm``): as root, files its user left there are removed after the run. Without root and
without user namespaces it runs with neither network isolation nor the PID namespace (``describe()`` says
so): a daemon that leaves its session then outlives the run. CPU and memory are bounded per process, not
for the tree (no cgroups).
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass

from e2c.sandbox.base import Limits, RunResult

STDERR_TAIL = 4096
UID_BASE = 2_115_000_000
"""First uid of the per-run users (root mode): far above any real account."""
UID_SLOTS = 64


def _tool(name: str) -> str | None:
    return shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin:" + os.environ.get("PATH", ""))


def _probe(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@dataclass(frozen=True)
class Isolation:
    """What this machine lets the local backend do, found once by :func:`probe_isolation`."""

    mode: str  # "root" (namespaces + own user), "userns" (user namespace), "plain" (rlimits only)
    prlimit: str
    setpriv: str
    unshare: str | None

    def describe(self) -> str:
        if self.mode == "root":
            return (
                "local: network and PID namespaces, an unprivileged user per run, rlimits, wall-clock kill; "
                "not isolated: reading world-readable files, writing /tmp (cleaned after the run)"
            )
        if self.mode == "userns":
            return (
                "local: user, network and PID namespaces, rlimits, wall-clock kill; not isolated: the "
                "caller's files (the program runs with the caller's rights)"
            )
        return (
            "local: rlimits and a wall-clock kill of the process group only (no namespaces here): NOT "
            "isolated: the network, the caller's files, daemons that leave the session"
        )


def probe_isolation() -> Isolation:
    """Find the tools and what the kernel allows (``unshare`` with and without a user namespace)."""
    prlimit, setpriv, unshare = _tool("prlimit"), _tool("setpriv"), _tool("unshare")
    if prlimit is None or setpriv is None:
        from e2c.errors import UserError

        raise UserError("the local sandbox needs prlimit and setpriv (Debian: apt-get install util-linux)")
    root = os.geteuid() == 0
    if unshare is not None and root and _probe([unshare, "--net", "--pid", "--fork", "--kill-child", "true"]):
        return Isolation("root", prlimit, setpriv, unshare)
    if unshare is not None and _probe(
        [unshare, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "true"]
    ):
        return Isolation("userns", prlimit, setpriv, unshare)
    return Isolation("plain", prlimit, setpriv, None)


def limit_args(prlimit: str, limits: Limits) -> list[str]:
    """The ``prlimit`` words for ``limits`` (soft = hard, so the program cannot raise them)."""
    mb = 1024 * 1024
    return [
        prlimit,
        f"--as={limits.memory_mb * mb}",
        f"--cpu={limits.cpu}",
        f"--fsize={limits.file_mb * mb}",
        f"--nofile={limits.nofile}",
        f"--nproc={limits.nproc}",
        "--core=0",
        "--",
    ]


def world_reachable(path: str) -> bool:
    """Whether any user may execute ``path``: every folder on its real path searchable by others, and the
    file executable by others (the program runs as a user of its own)."""
    real = os.path.realpath(path)
    try:
        if not os.stat(real).st_mode & stat.S_IXOTH:
            return False
        d = os.path.dirname(real)
        while True:
            if not os.stat(d).st_mode & stat.S_IXOTH:
                return False
            if d == os.path.dirname(d):
                return True
            d = os.path.dirname(d)
    except OSError:
        return False


PYTHON_CANDIDATES = ("/usr/local/bin/python3", "/usr/bin/python3")


def interpreter(root: bool) -> str:
    """The Python that runs programs: the caller's own when a user of the sandbox's may execute it (always,
    without root), else the system's ``python3`` (a pyenv under a private ``/root``, for instance)."""
    if not root or world_reachable(sys.executable):
        return sys.executable
    for cand in PYTHON_CANDIDATES:
        if world_reachable(cand):
            return cand
    from e2c.errors import UserError

    raise UserError(
        f"the sandbox's user cannot execute {sys.executable} (a folder on its path is private) and there "
        f"is no {' or '.join(PYTHON_CANDIDATES)}; install python3 system-wide"
    )


def _child_env(home: str) -> dict[str, str]:
    # Nothing of the caller's environment (tokens, proxies, paths) reaches the program.
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": home}


class LocalSandbox:
    """The default backend (see the module's text). Thread-safe: runs share nothing but the uid pool."""

    name = "local"

    def __init__(self, python: str | None = None, isolation: Isolation | None = None) -> None:
        self.iso = isolation or probe_isolation()
        self.python = python or interpreter(self.iso.mode == "root")
        self._uids: queue.Queue[int] = queue.Queue()
        # A uid range per caller process, so two toolkit processes on one machine do not share users.
        base = UID_BASE + (os.getpid() % 30_000) * UID_SLOTS
        for i in range(UID_SLOTS):
            self._uids.put(base + i)

    def describe(self) -> str:
        return self.iso.describe()

    def command(self, limits: Limits, uid: int | None, argv: list[str], work: str = "") -> list[str]:
        """The exec chain that runs ``argv`` under ``limits`` (as ``uid`` in root mode) in folder ``work``."""
        iso = self.iso
        cmd = [*limit_args(iso.prlimit, limits), iso.setpriv, "--pdeathsig", "KILL", "--"]
        if iso.mode == "root":
            cmd += [iso.unshare or "unshare", "--net", "--pid", "--fork", "--kill-child", "--"]
            cmd += [iso.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--nnp"]
            cmd += ["--pdeathsig", "KILL", "--"]
        elif iso.mode == "userns":
            cmd += [iso.unshare or "unshare", "--user", "--map-root-user", "--net", "--pid", "--fork"]
            cmd += ["--kill-child", "--", iso.setpriv, "--nnp", "--pdeathsig", "KILL", "--"]
        return cmd + argv

    def run(self, files: Mapping[str, str], main: str, stdin: str, limits: Limits) -> RunResult:
        """Run ``python main`` with ``files`` in a fresh folder; never raises on the program's behaviour."""
        uid = self._uids.get() if self.iso.mode == "root" else None
        work = tempfile.mkdtemp(prefix="e2c-sbx-")
        io_dir = tempfile.mkdtemp(prefix="e2c-sbx-io-")  # 0700, the caller's: the program cannot name it
        try:
            return self._run(files, main, stdin, limits, uid, work, io_dir)
        except OSError as e:
            return RunResult("sandbox_error", None, "", f"local sandbox: {e}", 0.0)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(io_dir, ignore_errors=True)
            if uid is not None:
                _remove_files_of(uid)
                self._uids.put(uid)

    def _run(
        self,
        files: Mapping[str, str],
        main: str,
        stdin: str,
        limits: Limits,
        uid: int | None,
        work: str,
        io_dir: str,
    ) -> RunResult:
        for name, text in files.items():
            path = os.path.join(work, name)
            with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(text)
            if uid is not None:
                os.chown(path, uid, uid)
        if uid is not None:
            os.chown(work, uid, uid)
        paths = {k: os.path.join(io_dir, k) for k in ("in", "out", "err")}
        with open(paths["in"], "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(stdin)
        argv = [self.python, "-I", "-B", main]
        start = time.monotonic()
        with (
            open(paths["in"], "rb") as fin,
            open(paths["out"], "wb") as fout,
            open(paths["err"], "wb") as ferr,
        ):
            proc = subprocess.Popen(
                self.command(limits, uid, argv, work),
                stdin=fin,
                stdout=fout,
                stderr=ferr,
                cwd=work,
                env=_child_env(work),
                start_new_session=True,
                close_fds=True,
            )
            timed_out = False
            try:
                proc.wait(timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_tree(proc)
            except BaseException:  # an interrupt of the caller must not leave the tree running
                kill_tree(proc)
                raise
        seconds = time.monotonic() - start
        return _result(proc.returncode, timed_out, paths["out"], paths["err"], limits, seconds)


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill the run's process group (its namespace dies with its PID 1) and reap the launcher."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _read(path: str, limit: int | None = None) -> str:
    with open(path, "rb") as f:
        if limit is None:
            data = f.read()
        else:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            data = f.read()
    return data.decode("utf-8", errors="replace")


def _result(rc: int | None, timed_out: bool, out: str, err: str, limits: Limits, seconds: float) -> RunResult:
    stdout, stderr = _read(out), _read(err, STDERR_TAIL)
    cap = limits.file_mb * 1024 * 1024
    if timed_out:
        status = "timeout"
    elif rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or os.path.getsize(out) >= cap:
        status = "output_limit"
    elif rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGKILL) and (
        seconds >= limits.cpu - 1
    ):
        status = "timeout"  # the CPU-time rlimit: a busy loop under a generous wall limit
    elif rc == 0:
        status = "ok"
    elif "MemoryError" in stderr[-400:]:
        status = "memory"
    else:
        status = "exit"
    return RunResult(status, rc, stdout, stderr, seconds)


_SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def _remove_files_of(uid: int) -> None:
    """Remove what a run's user left in the world-writable folders (root mode; best effort)."""
    for d in _SHARED_DIRS:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                if e.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.unlink(e.path)
            except OSError:
                continue
