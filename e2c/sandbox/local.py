"""The local sandbox: each program a separate process tree, isolated with the kernel's own tools.

A run is a chain of util-linux tools, each exec'ing the next, so no Python runs between the caller's fork and
the program: ``prlimit`` (rlimits, the file size bounding standard output), ``setpriv --pdeathsig KILL``,
``unshare`` into new network, PID, IPC, UTS and mount namespaces, fresh tmpfs on the world-writable folders and
the rest remounted read-only (as root), a root-owned PID 1 the program cannot signal, then an unprivileged uid
of the run's own (:class:`UidPool` never hands one out while a process of it lives), or a user namespace
without root. The caller kills the group at the wall limit. Does not protect: world-readable host files are
readable; CPU and memory are per process; without a mount namespace world-writable folders are exposed, and
without root or user namespaces there is no network or PID isolation (``describe()`` says so).
More: docs/code.md, "The sandbox: what each backend protects against".
"""

from __future__ import annotations

import collections
import os
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from e2c.core.errors import UserError
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


PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
"""The world-writable folders of a Debian host: a fresh tmpfs each in a run's mount namespace (root mode),
else swept of the run's files after it."""


def existing_private_dirs() -> tuple[str, ...]:
    """The folders of :data:`PRIVATE_DIRS` this host has (a mount point must exist, and not be a link)."""
    return tuple(d for d in PRIVATE_DIRS if os.path.isdir(d) and not os.path.islink(d))


PRIVATE_TMPFS_MB = 64
"""The size of each private tmpfs (memory: files there count against the host's RAM)."""


@dataclass(frozen=True)
class Isolation:
    """What this machine lets the local backend do, found once by :func:`probe_isolation`."""

    mode: str  # "root" (namespaces + own user), "userns" (user namespace), "plain" (rlimits only)
    prlimit: str
    setpriv: str
    unshare: str | None
    mount: str | None = None
    """``mount``, where root mode can make a mount namespace with private tmpfs folders (else None)."""
    private: tuple[str, ...] = ()
    """The folders of :data:`PRIVATE_DIRS` that exist here (each gets its own tmpfs when ``mount`` is set)."""
    readonly: tuple[str, ...] = ()
    """The host's writable file systems (mount points), made read-only in a run's mount namespace."""

    def namespace_words(self, fstab: str | None, work: str = "/") -> list[str]:
        """Root mode's words from the new namespaces to (not including) the drop to the run's user: with a
        mount table, a mount namespace where ``/bin/sh`` mounts the table, makes the host's file systems
        read-only (:attr:`readonly`) and enters ``work`` (its bind mount) before exec'ing on; then PID 1."""
        un = self.unshare or "unshare"
        if fstab is None:
            words = [un, "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--"]
        else:
            mnt = shlex.quote(self.mount or "mount")
            steps = [f'{mnt} -n -a -T "$0"']
            steps += [f"{mnt} -n -o remount,bind,ro {shlex.quote(m)}" for m in self.readonly]
            script = " && ".join([*steps, 'cd "$1"', "shift", 'exec "$@"'])
            words = [
                un,
                "--net",
                "--pid",
                "--ipc",
                "--uts",
                "--mount",
                "--propagation",
                "private",
                "--mount-proc",
            ]
            words += ["--fork", "--kill-child", "--", SH, "-c", script, fstab, work]
        # PID 1 of the namespace: a root-owned process the program can neither signal nor trace.
        return [*words, un, "--fork", "--kill-child", "--"]

    def describe(self) -> str:
        if self.mode == "root":
            tmp = (
                f"private tmpfs on {', '.join(self.private)}"
                if self.mount
                else f"{', '.join(self.private)} swept of the run's files after it"
            )
            ro = f", the host's file systems read-only ({', '.join(self.readonly)})" if self.readonly else ""
            return (
                "local: network, PID, IPC and mount namespaces, an unprivileged user per run (every process "
                f"of it killed after the run), rlimits, wall-clock kill, {tmp}{ro}; not isolated: reading "
                "world-readable files" + ("" if self.mount else ", writing other world-writable folders")
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
    """Find the tools and what the kernel allows (``unshare`` with and without a user namespace, and a mount
    namespace with tmpfs as root)."""
    prlimit, setpriv, unshare, mount = _tool("prlimit"), _tool("setpriv"), _tool("unshare"), _tool("mount")
    if prlimit is None or setpriv is None:
        raise UserError("the local sandbox needs prlimit and setpriv (Debian: apt-get install util-linux)")
    private = existing_private_dirs()
    root = os.geteuid() == 0
    if unshare is not None and root and _probe([unshare, "--net", "--pid", "--fork", "--kill-child", "true"]):
        if mount is not None and os.path.exists(SH) and private:
            iso = Isolation("root", prlimit, setpriv, unshare, mount, private)
            with tempfile.TemporaryDirectory(prefix="e2c-sbx-probe-") as d:
                fstab = write_fstab(iso, d, "")
                if _probe([*iso.namespace_words(fstab), "true"]):
                    # Each file system that can be made read-only here (a FUSE mount may refuse).
                    ro = tuple(
                        m
                        for m in writable_mounts(private)
                        if _probe([*replace(iso, readonly=(m,)).namespace_words(fstab), "true"])
                    )
                    return replace(iso, readonly=ro)
        return Isolation("root", prlimit, setpriv, unshare, None, private)
    if unshare is not None and _probe(
        [unshare, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "true"]
    ):
        return Isolation("userns", prlimit, setpriv, unshare)
    return Isolation("plain", prlimit, setpriv, None)


SH = "/bin/sh"
_PSEUDO_FS = frozenset(
    "proc sysfs devtmpfs devpts cgroup cgroup2 mqueue securityfs debugfs tracefs pstore bpf autofs "
    "hugetlbfs configfs fusectl binfmt_misc nsfs efivarfs selinuxfs rpc_pipefs".split()
)


def writable_mounts(private: tuple[str, ...], mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """Mount points of the host's writable file systems (not the kernel's pseudo ones, not under
    ``/proc``, ``/sys`` or ``/dev``, not a private folder or below one), outermost first."""
    out: list[str] = []
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 6 or not rest:
            continue
        point = fields[4].encode().decode("unicode_escape")  # octal escapes of blanks
        opts = fields[5].split(",")
        if rest[0] in _PSEUDO_FS or "ro" in opts:
            continue
        if any(
            point == p or point.startswith(p.rstrip("/") + "/") for p in ("/proc", "/sys", "/dev", *private)
        ):
            continue
        if point not in out:
            out.append(point)
    return sorted(out, key=lambda p: p.count("/") if p != "/" else 0)


def write_fstab(iso: Isolation, io_dir: str, work: str) -> str:
    """The run's mount table, written into ``io_dir`` (the caller's): a tmpfs on each private folder, then
    the run's folder bound back at its own path (``/proc/self/cwd`` is that folder: the launcher's working
    directory), which a tmpfs on ``/tmp`` would otherwise hide."""
    opts = f"size={PRIVATE_TMPFS_MB}m,mode=1777,nosuid,nodev"
    lines = [f"e2c-sbx {d} tmpfs {opts} 0 0" for d in iso.private]
    if work and work != "/":
        lines.append(f"/proc/self/cwd {_fstab_path(work)} none bind,X-mount.mkdir 0 0")
    path = os.path.join(io_dir, "fstab")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _fstab_path(p: str) -> str:
    # fstab fields are separated by blanks; octal escapes are its quoting (mkdtemp names have none of these).
    return p.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011").replace("\n", "\\012")


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
    ends_with_its_namespace = True
    """Whether a run whose launcher exited on its own had no process left: the launcher waits for PID 1,
    whose exit the kernel completes only when every process of the namespace has ended."""

    def __init__(self, python: str | None = None, isolation: Isolation | None = None) -> None:
        self.iso = isolation or probe_isolation()
        self.python = python or interpreter(self.iso.mode == "root")
        self._uids = uid_pool() if self.iso.mode == "root" else None

    @property
    def private_pids(self) -> bool:
        """Whether a run's processes are alone in a PID namespace (beside a PID 1 of the sandbox's), so that
        the program's driver may kill every other process of the run (:mod:`e2c.rewards.code_judge`)."""
        return self.iso.mode in ("root", "userns")

    def describe(self) -> str:
        return self.iso.describe()

    uses_lifeline = False
    """Whether :meth:`command` takes a lifeline: the read end of a pipe whose write end only the caller
    holds, open for as long as the caller lives (the local chain needs none: its PID 1 is set up by
    ``unshare``, which arms its parent-death signal before the program exists)."""

    def command(
        self,
        limits: Limits,
        uid: int | None,
        argv: list[str],
        work: str = "",
        fstab: str | None = None,
        lifeline: int | None = None,
    ) -> list[str]:
        """The exec chain that runs ``argv`` under ``limits`` (as ``uid`` in root mode) in folder ``work``,
        with the mount table ``fstab`` (:func:`write_fstab`; root mode with a mount namespace)."""
        iso = self.iso
        cmd = [*limit_args(iso.prlimit, limits), iso.setpriv, "--pdeathsig", "KILL", "--"]
        if iso.mode == "root":
            cmd += iso.namespace_words(fstab if iso.mount else None, work or "/")
            cmd += [iso.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--nnp"]
            cmd += ["--pdeathsig", "KILL", "--"]
        elif iso.mode == "userns":
            un = iso.unshare or "unshare"
            cmd += [un, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--"]
            cmd += [un, "--fork", "--kill-child", "--", iso.setpriv, "--nnp", "--pdeathsig", "KILL", "--"]
        return cmd + argv

    def run(self, files: Mapping[str, str], main: str, stdin: str, limits: Limits) -> RunResult:
        """Run ``python main`` with ``files`` in a fresh folder; never raises on the program's behaviour."""
        uid = self._uids.get() if self._uids is not None else None
        work = tempfile.mkdtemp(prefix="e2c-sbx-")
        io_dir = tempfile.mkdtemp(prefix="e2c-sbx-io-")  # 0700, the caller's: the program cannot name it
        ended = False
        try:
            r = self._run(files, main, stdin, limits, uid, work, io_dir)
            # An exit code (not a signal, not the wall limit): the launcher reaped PID 1 itself.
            ended = r.status != "timeout" and r.returncode is not None and r.returncode >= 0
            return r
        except OSError as e:
            return RunResult("sandbox_error", None, "", f"local sandbox: {e}", 0.0)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(io_dir, ignore_errors=True)
            if uid is not None:
                self._release(uid, ended)

    def _release(self, uid: int, ended: bool = False) -> None:
        assert self._uids is not None
        if ended and self.ends_with_its_namespace and self.iso.mount:
            self._uids.put_ended(uid)
            return
        # Killed (the wall limit, a signal) or no namespace to vouch for it: every process of the run's
        # user is killed now, and none checked left, before the uid can be reused.
        self._uids.put_checked(uid, alive=kill_users({uid}))
        if not self.iso.mount:
            remove_files_of(uid, self.iso.private)

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
        fstab = write_fstab(self.iso, io_dir, work) if self.iso.mount else None
        argv = [self.python, "-I", "-B", main]
        start = time.monotonic()
        # The lifeline's write end stays with the caller alone (not inheritable): its read end sees EOF
        # once the caller is gone, however it died (see e2c.sandbox.bwrap).
        lifeline_r, lifeline_w = os.pipe() if self.uses_lifeline else (None, None)
        with (
            open(paths["in"], "rb") as fin,
            open(paths["out"], "wb") as fout,
            open(paths["err"], "wb") as ferr,
        ):
            try:
                proc = subprocess.Popen(
                    self.command(limits, uid, argv, work, fstab, lifeline_r),
                    stdin=fin,
                    stdout=fout,
                    stderr=ferr,
                    cwd=work,
                    env=_child_env(work),
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=() if lifeline_r is None else (lifeline_r,),
                )
            except BaseException:
                if lifeline_w is not None:
                    os.close(lifeline_w)
                raise
            finally:
                if lifeline_r is not None:
                    os.close(lifeline_r)
            timed_out = False
            try:
                wait_exit(proc, limits.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_tree(proc)
            except BaseException:  # an interrupt of the caller must not leave the tree running
                kill_tree(proc)
                raise
            finally:
                if lifeline_w is not None:
                    os.close(lifeline_w)
        seconds = time.monotonic() - start
        return _result(proc.returncode, timed_out, paths["out"], paths["err"], limits, seconds)


class UidPool:
    """A caller process's per-run uids (:func:`uid_range`). Thread-safe; :meth:`get` waits for a free one.

    A uid is never handed out while a process of it lives. It comes back either *checked* (its run was
    killed: every process of it killed and none left, checked at once in ``/proc``) or *ended* (its
    launcher reaped the namespace's PID 1, so the kernel had already ended every process of the run).
    Ended uids are checked all together, in one pass over ``/proc`` that kills what it finds, when the first
    of them is handed out again: the same guarantee before any reuse, for one scan per pool's turn instead
    of one per run. A uid with a process that will not die (uninterruptible sleep) leaves the pool."""

    def __init__(self, uids: list[int]) -> None:
        self._free: collections.deque[int] = collections.deque(uids)
        self._ended: set[int] = set(uids)  # a caller that held this pid before may have left processes
        self._cond = threading.Condition()
        self.retired: set[int] = set()

    def get(self) -> int:
        with self._cond:
            while True:
                while not self._free:
                    self._cond.wait()
                uid = self._free.popleft()
                if uid in self._ended:
                    batch, self._ended = self._ended, set()
                    stuck = kill_users(batch)
                    self._retire(stuck)
                if uid not in self.retired:
                    return uid

    def put_ended(self, uid: int) -> None:
        with self._cond:
            self._ended.add(uid)
            self._free.append(uid)
            self._cond.notify()

    def put_checked(self, uid: int, alive: set[int]) -> None:
        with self._cond:
            self._retire(alive)
            if uid not in self.retired:
                self._free.append(uid)
                self._cond.notify()

    def _retire(self, uids: set[int]) -> None:
        self.retired |= uids
        self._free = collections.deque(u for u in self._free if u not in uids)


_pool: tuple[int, UidPool] | None = None
_pool_lock = threading.Lock()


def uid_pool() -> UidPool:
    """This process's uid pool, one shared by every sandbox it builds (two instances must never hand out
    one uid at once, nor sweep the other's running programs). Made on first use in each process (a forked
    worker has a pid, and so a range, of its own); its uids start unchecked, so whatever a process that
    held this pid before left running under them is killed before the first run."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), UidPool(uid_range(os.getpid())))
        return _pool[1]


PID_LIMIT = 4_194_304
"""Linux pids stay below 2**22 (the largest ``pid_max``), so a range per pid is each live caller's own."""
UID_MAX = UID_BASE + PID_LIMIT * UID_SLOTS
"""One past the last per-run uid (below 2**32 - 1)."""


def uid_range(pid: int) -> list[int]:
    """The per-run uids of the caller with this pid: a range of its own (two live callers never share a
    user, so neither's process limit counts the other's runs), below 2**32 - 1."""
    base = UID_BASE + (pid % PID_LIMIT) * UID_SLOTS
    return list(range(base, base + UID_SLOTS))


def processes_of(uids: set[int]) -> list[int]:
    """Pids of live (not zombie) processes whose real uid is in ``uids``, read from ``/proc`` (exact: a
    non-dumpable process's ``/proc`` folder is root's, its ``status`` says its real uid)."""
    return [pid for pid, _ in _processes(uids)]


def _processes(uids: set[int]) -> list[tuple[int, int]]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                st = f.read(2048)
        except OSError:
            continue
        i, j = st.find(b"\nUid:"), st.find(b"\nState:")
        if i < 0 or j < 0:
            continue
        uid = int(st[i + 5 :].split(None, 1)[0])
        if uid in uids and st[j + 7 :].split(None, 1)[0] != b"Z":
            found.append((int(name), uid))
    return found


def kill_users(uids: set[int], timeout_s: float = 5.0) -> set[int]:
    """SIGKILL every process of ``uids`` until none is left (a fork that races the kill is caught by the
    next pass: the rlimit bounds how many there can be). Returns the uids that still have a process after
    ``timeout_s`` (one in uninterruptible sleep): empty when none is left."""
    end = time.monotonic() + timeout_s
    while True:
        found = _processes(uids)
        if not found:
            return set()
        if time.monotonic() > end:
            return {u for _, u in found}
        for pid, _ in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.002)


def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    """``proc.wait(timeout)`` woken by the exit itself: a pidfd polled with the timeout. (``Popen.wait``
    with a timeout sleeps in doubling steps, so a 16 ms run is seen after 31 ms.) Raises
    ``subprocess.TimeoutExpired`` as ``wait`` does; falls back to it where pidfds are missing."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=timeout_s)
    try:
        if not select.select([fd], [], [], timeout_s)[0]:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
        return proc.wait()
    finally:
        os.close(fd)


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


def remove_files_of(uid: int, dirs: tuple[str, ...] = PRIVATE_DIRS) -> None:
    """Remove what a run's user left in the world-writable folders ``dirs`` (root mode without a mount
    namespace; best effort: the top level of each folder, which is all a user may create there)."""
    for d in dirs:
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
