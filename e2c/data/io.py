"""Reading and writing row files (JSONL, JSON lists, parquet): one place for every data module.

Writes are atomic (a temporary sibling renamed over the target), so a killed run never leaves half a
file and never destroys a file that was already complete.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from e2c.cli import UserError

ROW_SUFFIXES = (".jsonl", ".json", ".parquet")


def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """Rows of a ``.jsonl`` / ``.json`` (list) / ``.parquet`` file; malformed input raises UserError."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        except Exception as e:
            raise UserError(f"{path}: not a readable parquet file ({type(e).__name__}: {e})") from None
        yield from table.to_pylist()
        return
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise UserError(f"{path}: malformed JSON at line {e.lineno}: {e.msg}") from None
        if not isinstance(data, list):
            raise UserError(f"{path}: expected a JSON list of objects")
        yield from data
        return
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"{path}:{lineno}: malformed JSON line ({e.msg})") from None
            if not isinstance(row, dict):
                raise UserError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            yield row


def write_parquet(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write rows to a parquet file atomically (a temporary sibling renamed over the target).

    Same rows give a byte-identical file. Rows pyarrow cannot store raise UserError naming the file.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not rows:
        raise UserError(f"refusing to write {path}: no rows")
    try:
        table = pa.Table.from_pylist(list(rows))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise UserError(f"{path}: rows do not form one table ({e})") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    except pa.ArrowNotImplementedError as e:
        raise UserError(f"{path}: cannot store these rows as parquet ({e})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path
