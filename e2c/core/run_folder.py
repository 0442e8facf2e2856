"""A run owns its folder: one lock for the run's lifetime, and a record of what made the run.

Every command that writes a run folder goes through here. :class:`RunClaim` holds an exclusive ``flock`` on
``<folder>/.e2c-run.lock`` until the command ends; a second command refuses in one line, and a killed run
leaves no stale lock (the kernel drops it). ``<folder>/e2c-run.json`` records the run's identity;
:func:`identity_diff` is the one definition of "the same run": another identity refuses before any work and
touches no file, and ``--force`` moves the old files to ``<folder>.replaced-<time>`` (nothing is deleted).
The lock protects against two commands on one machine or on a file system whose ``flock`` is real; not
against file systems that ignore locks, nor a process that writes the folder outside the toolkit's commands.
More: docs/bad-input.md, "A run owns its folder".
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.files import atomic_write_json, json_kind
from e2c.core.runinfo import git_commit

LOCK_NAME = ".e2c-run.lock"
IDENTITY_NAME = "e2c-run.json"
FORCE_HINT = "use another {flag}, or --force to start over"
FORCE_HELP = (
    "start over: the run folder's files (another run's, or this run's) move to a sibling folder "
    "<folder>.replaced-<time> (nothing is deleted)"
)
OWN_FILES = (LOCK_NAME, IDENTITY_NAME)
# Folders this process holds -> how many claims on each are open: a command's library call that claims its
# folder again (run_eval inside the eval command) nests instead of meeting its own lock.
_HELD: dict[Path, int] = {}


# Hydra keys that say how a run is run, watched, saved or how long it goes on, not what it computes: left
# out of a training run's identity, so a resumed run may log elsewhere, save more often or train longer.
NOT_IDENTITY_KEYS = (
    "trainer.logger",
    "trainer.project_name",
    "trainer.experiment_name",
    "trainer.save_freq",
    "trainer.test_freq",
    "trainer.total_epochs",
    "trainer.total_training_steps",
    "trainer.max_actor_ckpt_to_keep",
    "trainer.max_ckpt_to_keep",
    "trainer.resume_mode",
    "trainer.resume_from_path",
    "trainer.val_before_train",
    "trainer.log_val_generations",
    "trainer.default_local_dir",
)


def identity_overrides(overrides: Sequence[str]) -> list[str]:
    """The Hydra overrides that are part of a training run's identity: all but :data:`NOT_IDENTITY_KEYS`
    (with ``+``/``++``/``~`` prefixes), in order.

    >>> identity_overrides(["optim.lr=1e-5", "trainer.logger=[console]", "+trainer.save_freq=5"])
    ['optim.lr=1e-5']
    """
    return [o for o in overrides if o.partition("=")[0].lstrip("+~") not in NOT_IDENTITY_KEYS]


def local_paths(paths: Sequence[str]) -> list[str]:
    """Data or model paths as one identity: local ones absolute (a run resumed from another folder is
    the same run), remote ones (``hdfs://``, hub ids that are not folders) as written."""
    return [p if "://" in p or not os.path.exists(p) else os.path.abspath(p) for p in paths]


def identity_diff(recorded: Any, now: Any, prefix: str = "") -> list[str]:
    """``key old -> new`` for every leaf where two run identities differ (nested keys joined by dots): the
    one definition of "the same run", used by every command. Empty: the same run. A key missing from one
    mapping reads as null there, so a setting an older record lacks is the same as one set to null (a new
    setting whose default is not null needs the record's ``defaults``, see :class:`RunFolder`).

    >>> identity_diff({"model": "tiny", "settings": {"seed": 0}}, {"model": "tiny", "settings": {"seed": 1}})
    ['settings.seed 0 -> 1']
    """
    if isinstance(recorded, Mapping) and isinstance(now, Mapping):
        return [
            line
            for k in sorted(set(recorded) | set(now), key=str)
            for line in identity_diff(recorded.get(k), now.get(k), f"{prefix}{k}.")
        ]
    if isinstance(recorded, list | tuple) and isinstance(now, list | tuple):
        recorded, now = list(recorded), list(now)  # JSON reads a tuple back as a list
        # Elements compare by the same rule (a mapping inside a list reads a missing key as null too);
        # a difference is named as the whole list.
        if len(recorded) == len(now) and all(not identity_diff(x, y) for x, y in zip(recorded, now)):
            return []
    return [] if recorded == now else [f"{prefix.rstrip('.')} {recorded!r} -> {now!r}"]


def _holder(lock: Path) -> dict[str, Any]:
    """What the lock file says about the process that holds (or held) it; {} when empty or unreadable."""
    try:
        info = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _describe(info: Mapping[str, Any]) -> str:
    if not info.get("pid"):
        return "another process"
    where = f" on {info['host']}" if info.get("host") and info["host"] != socket.gethostname() else ""
    since = f", since {info['started']}" if info.get("started") else ""
    return f"process {info['pid']}{where} ({info.get('command', '?')}{since})"


def _in_use(what: str, flag: str, info: Mapping[str, Any]) -> UserError:
    return UserError(f"{what} is in use by {_describe(info)}; wait for it to finish, or use another {flag}")


def _locked_by_other(lock: Path) -> bool:
    """Whether a live process holds ``lock`` (probed without creating or changing anything)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        return e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)  # closing drops a lock this probe took
    return False


def check_lock(lock: Path, what: str, flag: str) -> None:
    """UserError when a live process holds ``lock`` (``what`` names the run's files in the line, ``flag``
    the way out); creates and changes nothing."""
    if _locked_by_other(lock):
        raise _in_use(what, flag, _holder(lock))


@contextlib.contextmanager
def hold_lock(
    lock: Path, command: str, what: str, flag: str, log: Callable[[str], None] = print
) -> Iterator[None]:
    """Hold the exclusive lock ``lock`` (created, with its folder) while the block runs, writing into it
    who holds it. Another live holder: UserError naming it (``what``: the run's files, ``flag``: the way
    out). A holder that died (its lock dropped by the kernel): taken over, with a line to ``log``."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise UserError(f"cannot write {what}: {e.strerror or e}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise UserError(f"cannot lock {lock}: {e.strerror or e}") from None
            raise _in_use(what, flag, _holder(lock)) from None
        before = _holder(lock)
        if before.get("pid") and before.get("pid") != os.getpid():
            log(f"{command}: took over the lock of {_describe(before)}, which no longer runs")
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "argv": sys.argv,
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
        except OSError as e:
            raise UserError(f"cannot write {lock}: {e.strerror or e}") from None
        yield
    finally:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # a clean end: the next command has nobody to take the lock over from
        os.close(fd)


def read_identity(folder: Path) -> dict[str, Any] | None:
    """The recorded identity of the run in ``folder`` (None: none recorded). UserError, changing nothing,
    for a record that cannot be read."""
    path = folder / IDENTITY_NAME
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(
            f"cannot read {path} ({e.strerror or e}); move the run folder away to start over"
        ) from None
    except ValueError:
        raise UserError(f"{path} is not valid JSON; move the run folder away to start over") from None
    if not isinstance(record, dict) or not isinstance(record.get("identity"), dict):
        kind = json_kind(record) if not isinstance(record, dict) else "object without an identity"
        raise UserError(f"{path} is not a run record (got a {kind}); move the run folder away to start over")
    return record


def _has_results(folder: Path, own: tuple[str, ...]) -> bool:
    """Whether ``folder`` holds anything but the run's own bookkeeping (``own``)."""
    try:
        return any(p.name not in own for p in folder.iterdir())
    except OSError:
        return False


class RunFolder:
    """The checked plan of one command's claim on a run folder (see the module's docstring).

    ``identity``: what made the run (JSON values); ``command``: its name in lines and records;
    ``legacy``: for folders written before ``e2c-run.json`` existed, a reader of the identity they
    recorded some other way (eval's and TTS's ``config.json``), None when they recorded none; ``own``:
    files the command writes before any result (a folder holding only these may be taken over by another
    identity); ``flag``: how the folder was given; ``defaults``: the values of settings added since a run
    was recorded (an older record without them is still the same run)."""

    def __init__(
        self,
        folder: str | Path,
        command: str,
        identity: Mapping[str, Any],
        *,
        force: bool = False,
        flag: str = "--output-dir",
        legacy: Callable[[], dict[str, Any] | None] | None = None,
        own: tuple[str, ...] = (),
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.command = command
        self.identity = json.loads(json.dumps(dict(identity), default=str))  # as it will read back
        self.force = force
        self.flag = flag
        self.legacy = legacy
        self.own = (*OWN_FILES, *own)
        self.defaults = dict(defaults or {})

    # ---------------------------------------------------------------- read-only checks before any work
    def check(self, lock: bool = True) -> list[str]:
        """Refuse, creating and changing nothing, a folder in use by a live process, or holding another
        run (unless ``force``). Run before :func:`e2c.commandline.entry.checks_done`; :meth:`claim` checks again
        under the lock (``lock=False``: a worker of the command that holds it). Returns ``["--force"]``
        when ``force`` will move the folder's files aside, else []."""
        if lock:
            check_lock(self.folder / LOCK_NAME, f"{self.flag} {self.folder}", self.flag)
        return self._conflict()

    def _recorded(self) -> dict[str, Any] | None:
        record = read_identity(self.folder)
        if record is not None:
            return record
        old = self.legacy() if self.legacy is not None else None
        return None if old is None else {"command": self.command, "identity": old}

    def _conflict(self) -> list[str]:
        """Why this run cannot resume the folder's files: how the recorded run differs, or (with ``force``
        and files there) ``--force``; [] when it can (the same run, no run, or nothing but bookkeeping).
        UserError for another run without ``force``."""
        if not self.folder.is_dir() or not _has_results(self.folder, self.own):
            return []  # nothing to mix: this run takes the folder (over)
        if self.force:
            return ["--force"]
        record = self._recorded()
        if record is None:
            # No record: the folder resumes (eval and TTS compare their own config.json).
            return []
        diff = identity_diff(
            {"command": record.get("command"), **self.defaults, **record["identity"]},
            {"command": self.command, **self.identity},
        )
        if diff:
            raise UserError(
                f"{self.flag} {self.folder} holds another run ({'; '.join(diff[:4])}"
                f"{'; ...' if len(diff) > 4 else ''}); {FORCE_HINT.format(flag=self.flag)}"
            )
        return []

    # ---------------------------------------------------------------- the claim, for the run's lifetime
    @contextlib.contextmanager
    def claim(self, log: Callable[[str], None] = print) -> Iterator[Path]:
        """Create the folder, hold its lock while the block runs, and record the identity. With
        ``force`` and another run there, its files move to ``<folder>.replaced-<time>`` first. ``log``
        gets the informational lines (a lock taken over, files moved). Yields the folder. A claim
        inside one this process holds on the same folder nests without checking again: the outer claim
        (the same command) checked the folder and moved it aside if asked to."""
        key = self.folder.resolve()
        if key in _HELD:
            _HELD[key] += 1
            try:
                yield self.folder
            finally:
                _HELD[key] -= 1
            return
        with hold_lock(self.folder / LOCK_NAME, self.command, f"{self.flag} {self.folder}", self.flag, log):
            if self._conflict():
                self._move_aside(log)
            self._record()
            _HELD[key] = 1
            try:
                yield self.folder
            finally:
                del _HELD[key]

    def _move_aside(self, log: Callable[[str], None]) -> None:
        stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
        aside = self.folder.with_name(f"{self.folder.name}.replaced-{stamp}")
        n = 0
        while aside.exists():
            n += 1
            aside = self.folder.with_name(f"{self.folder.name}.replaced-{stamp}-{n}")
        try:
            aside.mkdir()
            for p in sorted(self.folder.iterdir()):
                if p.name != LOCK_NAME:
                    os.replace(p, aside / p.name)
        except OSError as e:
            raise UserError(
                f"--force: cannot move the old run's files to {aside}: {e.strerror or e}"
            ) from None
        log(f"{self.command}: --force: the old run's files are now in {aside}")

    def _record(self) -> None:

        record = read_identity(self.folder)
        if record is not None and not identity_diff(record["identity"], self.identity):
            return
        atomic_write_json(
            self.folder / IDENTITY_NAME,
            {
                "command": self.command,
                "identity": self.identity,
                "toolkit_commit": git_commit(),
                "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            },
        )
