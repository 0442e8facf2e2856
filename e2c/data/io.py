"""Reading and writing row files (JSONL, JSON lists, parquet): one place for every data module.

Writes are atomic (a temporary sibling renamed over the target), so a killed run never leaves half a
file and never destroys a file that was already complete.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from e2c.core.errors import UserError
from e2c.core.files import atomic_write, temp_sibling

ROW_SUFFIXES = (".jsonl", ".json", ".parquet")


def json_type(v: Any) -> str:
    """How a JSON value is named in an error message: ``null``, ``a number``, ``a list of 2 items``..."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, (list, tuple)):
        return f"a list of {len(v)} item{'s' * (len(v) != 1)}"
    if isinstance(v, dict):
        return "an object"
    return f"a {type(v).__name__}"


def _check_readable(path: Path) -> None:
    if path.is_dir():
        raise UserError(f"{path} is a folder; give a .jsonl, .json or .parquet file")
    if not path.exists():
        raise UserError(f"no such file: {path}")
    if not path.is_file():
        raise UserError(f"{path} is not a regular file")


def _json_error(e: Exception) -> str:
    """What went wrong parsing one JSON text, in a few words (json's message, or why it gave up)."""
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg} at column {e.colno}"
    if isinstance(e, RecursionError):
        return "nested too deeply"
    return str(e).split(";")[0]  # e.g. an integer over Python's 4300-digit conversion limit


def _decode(raw: bytes, path: Path, lineno: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        # Columns are 1-based; a user opens the file at that line in an editor.
        raise UserError(
            f"{path}:{lineno}: not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
            f"re-encode the file as UTF-8"
        ) from None


def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """Rows of a ``.jsonl`` / ``.json`` (list) / ``.parquet`` file; malformed input raises UserError.

    Any other suffix is read as JSONL. Text must be UTF-8 (a leading byte-order mark is allowed); a
    line that is not, a malformed line, or a row that is not a JSON object is named by file and line.
    """
    path = Path(path)
    _check_readable(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            yield from _parquet_rows(path)
        elif suffix == ".json":
            yield from _json_list_rows(path)
        else:
            yield from _jsonl_rows(path)
    except OSError as e:  # unreadable (permissions), or a file that vanished while being read
        raise UserError(f"cannot read {path}: {e.strerror or e}") from None


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
    except Exception as e:
        raise UserError(f"{path}: not a readable parquet file ({type(e).__name__}: {e})") from None
    yield from table.to_pylist()


def _json_list_rows(path: Path) -> Iterator[dict[str, Any]]:
    raw = path.read_bytes()
    # Decode line by line only to name the line of a bad byte; the whole text is parsed at once.
    lines = raw.splitlines(keepends=True)
    text = "".join(_decode(line, path, n) for n, line in enumerate(lines, 1)).removeprefix("\ufeff")
    if not text.strip():
        raise UserError(f"{path}: empty file; expected a JSON list of objects")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: malformed JSON at line {e.lineno}: {e.msg}") from None
    except (ValueError, RecursionError) as e:
        raise UserError(f"{path}: malformed JSON ({_json_error(e)})") from None
    if not isinstance(data, list):
        raise UserError(f"{path}: expected a JSON list of objects, got {json_type(data)}")
    for i, row in enumerate(data):
        if not isinstance(row, dict):
            raise UserError(f"{path}: item {i} of the list is {json_type(row)}, not a JSON object")
        yield row


def _jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            line = _decode(raw, path, lineno)
            if lineno == 1:
                line = line.removeprefix("\ufeff")  # a byte-order mark, as some editors write
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as e:
                raise UserError(f"{path}:{lineno}: malformed JSON line ({_json_error(e)})") from None
            if not isinstance(row, dict):
                raise UserError(f"{path}:{lineno}: expected a JSON object, got {json_type(row)}")
            yield row


def write_parquet(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write rows to a parquet file atomically (a temporary sibling renamed over the target).

    Same rows give a byte-identical file. Rows pyarrow cannot store raise UserError naming the file.
    """
    import pyarrow as pa

    path = Path(path)
    if not rows:
        raise UserError(f"refusing to write {path}: no rows")
    try:
        table = pa.Table.from_pylist(list(rows))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise UserError(f"{path}: rows do not form one table ({e})") from None
    return write_table(table, path)


def write_table(table: Any, path: str | Path) -> Path:
    """Write a pyarrow table to a parquet file atomically (a temporary sibling renamed over the target), so
    an existing file is never left half-written. UserError naming the file when it cannot be stored."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    tmp = temp_sibling(path)
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    except pa.ArrowNotImplementedError as e:
        raise UserError(f"{path}: cannot store these rows as parquet ({e})") from None
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Write rows as JSONL atomically (see :func:`e2c.core.files.atomic_write`).

    A failure (no space, no permission) raises UserError and leaves an existing ``path`` as it was.
    backslashreplace: a lone surrogate (model output can carry one) is written as its JSON escape, which
    reads back as the same string, instead of failing the whole file.
    """
    return atomic_write(path, lambda f: _dump_rows(rows, f), errors="backslashreplace")


def _dump_rows(rows: Iterable[dict[str, Any]], f: IO[str]) -> None:
    for row in rows:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
