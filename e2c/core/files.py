"""Writing files safely: atomic replacement, and checks of output paths before long work.

Every module that writes a result goes through here, so a killed run never leaves half a file, never
destroys a file that was already complete, and a bad output path is refused before any work is done.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from e2c.core.errors import UserError


def atomic_write(path: str | Path, write: Callable[[IO[str]], None], *, errors: str = "strict") -> Path:
    """Write a text file atomically: ``write(f)`` fills a temporary sibling, which is renamed over ``path``.

    A failure (no space, no permission, an exception in ``write``) leaves an existing ``path`` as it was;
    an ``OSError`` becomes UserError naming ``path``. A link is followed (the file it names is replaced,
    the link kept); a device or pipe (``/dev/null``, ``/dev/stdout``) is written in place.
    """
    shown = Path(path)
    if is_special(shown):
        try:
            with shown.open("w", encoding="utf-8", errors=errors) as f:
                write(f)
        except OSError as e:
            raise UserError(f"cannot write {shown}: {e.strerror or e}") from None
        return shown
    target = shown.resolve()
    tmp = temp_sibling(target)
    try:
        with tmp.open("w", encoding="utf-8", errors=errors) as f:
            write(f)
        os.replace(tmp, target)
    except OSError as e:
        raise UserError(f"cannot write {shown}: {e.strerror or e}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return shown


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda f: f.write(text))


def atomic_write_json(
    path: str | Path, obj: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = None
) -> Path:
    """Write ``obj`` as JSON (UTF-8, a final newline) atomically (see :func:`atomic_write`); the folder is
    created. ``default`` turns values JSON cannot store into ones it can (``str`` for paths).

    >>> import json, tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.json"
    >>> _ = atomic_write_json(p, {"accuracy": 0.5})
    >>> json.loads(p.read_text())
    {'accuracy': 0.5}
    """
    text = json.dumps(obj, indent=indent, ensure_ascii=False, default=default) + "\n"
    return atomic_write_text(path, text)


def atomic_replace_dir(path: str | Path, fill: Callable[[Path], None]) -> Path:
    """Build a folder atomically: ``fill(tmp)`` fills an empty temporary sibling folder, which then takes
    the place of ``path`` (an existing folder there is moved aside first and removed after).

    A failure in ``fill`` leaves an existing ``path`` as it was and removes the temporary folder, so a
    killed build never leaves half a model or half an export; an ``OSError`` becomes UserError naming
    ``path``. The folder gets the mode a plain ``mkdir`` would give it.

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "model"
    >>> _ = atomic_replace_dir(out, lambda d: (d / "config.json").write_text("{}"))
    >>> sorted(p.name for p in out.iterdir())
    ['config.json']
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent))
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    aside: Path | None = None  # the old folder, while it is out of the way
    swapped = False
    try:
        os.chmod(tmp, 0o777 & ~_UMASK)  # mkdtemp makes it private (0700)
        fill(tmp)
        if os.path.lexists(path):
            # A folder cannot be renamed over a non-empty one: move the old one aside, then swap.
            aside = Path(tempfile.mkdtemp(prefix=path.name + ".", suffix=".old", dir=path.parent)) / "old"
            os.replace(path, aside)
        os.replace(tmp, path)
        swapped = True
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        if aside is not None and not swapped and os.path.lexists(aside):
            os.replace(aside, path)  # the swap failed: the old folder goes back
        if aside is not None:
            shutil.rmtree(aside.parent, ignore_errors=True)
        if os.path.lexists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def is_special(path: Path) -> bool:
    """A device, a pipe, or an existing name under /dev or /proc (``/dev/stdout`` links to whatever stdout
    is): written in place, since renaming a file over it would replace the system's entry. A name there
    that does not exist is not special: nothing can create it, and the write check says so."""
    if not os.path.lexists(path):
        return False
    if path.absolute().parts[1:2] in (("dev",), ("proc",)):
        return True
    return not path.is_file() and not path.is_dir()


def temp_sibling(path: Path) -> Path:
    """An empty temporary file next to ``path`` (its folder created), or UserError naming ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        # mkstemp makes the file private (0600); the renamed result gets the mode the file had, or the
        # one a plain open() would give it.
        os.fchmod(fd, path.stat().st_mode & 0o7777 if path.is_file() else 0o666 & ~_UMASK)
    except OSError:
        pass
    finally:
        os.close(fd)
    return Path(name)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()


# ------------------------------------------------------------------------- checks before long work
def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not os.path.lexists(p) and p.parent != p:
        p = p.parent
    return p


def check_output_dir(path: str | Path, flag: str) -> None:
    """Refuse, before any work, a folder that cannot take outputs: a file there or on its way, or a
    place this process cannot write. Creates nothing (the write probe is removed at once)."""
    _check_dir(Path(path), f"{flag} {path}")


def ensure_output_dir(path: str | Path, flag: str) -> Path:
    """:func:`check_output_dir`, then create the folder: for a trainer that writes into it from other
    processes. Returns ``path``. A file in its place is refused as ``FLAG PATH exists and is not a folder``,
    an existing folder this process cannot write as ``FLAG PATH is not writable``."""
    path = Path(path)
    if os.path.lexists(path) and not path.is_dir():
        raise UserError(f"{flag} {path} exists and is not a folder")
    if path.is_dir():
        _probe_write(path, f"{flag} {path} is not writable")
        return path
    check_output_dir(path, flag)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {flag} {path}: {e.strerror or e}") from None
    return path


def _check_dir(path: Path, what: str) -> None:
    base = _nearest_existing(path)
    if not base.is_dir():
        raise UserError(f"{what}: {base} is a file, not a folder")
    _probe_write(base, f"{what}: cannot write in {base}")


def _probe_write(folder: Path, message: str) -> None:
    """UserError ``message (reason)`` unless a file can be created in ``folder``; permission bits do not
    tell (root ignores them; read-only mounts), so a file is created and removed at once."""
    try:
        fd, name = tempfile.mkstemp(prefix=".e2c-write-check.", dir=folder)
    except OSError as e:
        raise UserError(f"{message} ({e.strerror or e})") from None
    os.close(fd)
    os.unlink(name)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (same resolved path, or a link to the same file)."""
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def check_output_file(path: str | Path, flag: str, inputs: Sequence[str | Path] = ()) -> None:
    """Refuse, before any work, an output file that would overwrite one of ``inputs``, is a folder, or
    cannot be written (see :func:`check_output_dir`)."""
    path = Path(path)
    for src in inputs:
        if same_file(path, src):
            raise UserError(f"{flag} {path} is the input file {src}; writing it would destroy the input")
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; give a file path")
    if not is_special(path):  # a device or pipe is written in place; its folder does not matter
        _check_dir(path.parent, f"{flag} {path}")


# ------------------------------------------------------------------------- resumable record files
def drop_cut_line(path: Path, data: bytes | None = None) -> bytes:
    """Remove a last line without its newline (cut by a kill) from a records file, so that what a resumed
    run appends starts on a line of its own; returns the file's whole lines (``data``: its bytes, when read
    already). A missing file is empty. UserError naming the file when it cannot be read or repaired."""
    if data is None:
        data = read_file_bytes(path)
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        try:
            with path.open("r+b") as f:
                f.truncate(keep)
        except OSError as e:
            raise UserError(f"cannot repair {path} (its last line was cut): {e.strerror or e}") from None
        data = data[:keep]
    return data


def read_file_bytes(path: Path, missing_ok: bool = True) -> bytes:
    """A run file's bytes (b"" when it does not exist and ``missing_ok``), or UserError naming it (missing,
    a folder in its place, no permission)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        if missing_ok:
            return b""
        raise UserError(f"cannot read {path}: No such file or directory") from None
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}") from None


def json_kind(value: Any) -> str:
    """How an error line names what a JSON file held instead of an object: ``list``, ``str``, ..."""
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def read_records(
    path: Path,
    *,
    repair: bool = False,
    strict: bool = True,
    what: str = "record",
    hint: str = "move the file away to start over",
    data: bytes | None = None,
) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each whole line of a JSONL records file: the one reader of every
    resumable run file (eval's predictions, TTS records, the pass-rate samples).

    A last line without its newline was cut by a kill: it is left out and, with ``repair``, removed from the
    file (:func:`drop_cut_line`), so the resumed run appends after a whole line; without ``repair`` the file
    is not changed (the checks before a run). A whole line that is not a UTF-8 JSON object is, with
    ``strict``, a UserError naming the file, the line and ``what`` it should be, ending with ``hint``;
    without ``strict`` it is skipped (its work is done again).
    """
    if data is None:
        data = read_file_bytes(path)
    data = drop_cut_line(path, data) if repair else data[: data.rfind(b"\n") + 1]
    out = []
    for n, raw in enumerate(data.split(b"\n")[:-1], 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
            why = None if isinstance(row, dict) else f"a JSON {json_kind(row)}"
        except UnicodeDecodeError:
            why = "not UTF-8 text"
        except ValueError as e:
            why = f"not JSON: {e}"
        if why is None:
            out.append((n, row))
        elif strict:
            raise UserError(f"{path} line {n}: not a {what} ({why}); {hint}")
    return out


# ------------------------------------------------------------------------- appends of whole records
class RecordFile:
    """A JSONL (or text-log) file that only ever ends on a whole record: the one way a run appends.

    Each :meth:`write` appends its lines with unbuffered writes; a failed write (no space, quota, an I/O
    error) cuts the file back to where that call began and becomes one UserError naming the file and the
    cause, so the file ends on its last whole record and the same command resumes from it. A file removed
    (with its folder) while the run writes is noticed after each write and refused the same way, since
    writes to it would vanish. :meth:`sync` makes what was written durable (a kill of the machine keeps it).

    >>> import json, tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "predictions.jsonl"
    >>> with RecordFile(p) as f:
    ...     f.write([{"index": 0}, {"index": 1}])
    >>> [json.loads(line)["index"] for line in p.read_text().splitlines()]
    [0, 1]
    """

    RESUME_HINT = "it ends on its last whole record, and the same command resumes from it"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as e:
            raise UserError(f"cannot write {self.path}: {e.strerror or e}") from None

    def __enter__(self) -> RecordFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Append ``records`` as JSON lines (non-ASCII kept as it is), all or none."""
        self.write_lines([json.dumps(r, ensure_ascii=False) for r in records])

    def write_lines(self, lines: Sequence[str]) -> None:
        """Append ``lines`` (each without its newline; a newline inside one is an error of the caller's),
        all or none."""
        if lines:
            self._append(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))

    def write_text(self, text: str) -> None:
        """Append free text (a log's lines as they arrive): all of it or none of it."""
        if text:
            self._append(text.encode("utf-8", "surrogateescape"))

    def _append(self, data: bytes) -> None:
        start = -1
        try:
            start = os.lseek(self._fd, 0, os.SEEK_END)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as e:
            self._cut(start)
            raise UserError(f"cannot write {self.path}: {e.strerror or e}; {self.RESUME_HINT}") from None
        self._check_linked()

    def sync(self) -> None:
        """Make what was written durable (fsync); a failure is one UserError like a failed write."""
        try:
            os.fsync(self._fd)
        except OSError as e:
            raise UserError(f"cannot write {self.path}: {e.strerror or e}; {self.RESUME_HINT}") from None
        self._check_linked()

    def _cut(self, size: int) -> None:
        if size < 0:
            return
        try:
            os.ftruncate(self._fd, size)
        except OSError:
            pass  # the file may hold a cut line; readers leave it out (read_records) and a resume repairs it

    def _check_linked(self) -> None:
        try:
            gone = os.fstat(self._fd).st_nlink == 0
        except OSError:
            gone = True
        if gone:
            raise UserError(
                f"cannot write {self.path}: it was removed (or its folder) while the run wrote it"
            )
