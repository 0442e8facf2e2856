"""A pickle reader for untrusted test data: plain data only, bounded before and while it is built.

LiveCodeBench stores private tests as base64(zlib(pickle(JSON text))). :func:`restricted_loads` reads such a
pickle without running code: a scan of its opcodes (nothing built) refuses any that could build more than
plain data or more than :data:`MAX_PICKLE_ITEMS` of them; the unpickler then refuses any global. What it built
is measured per reference (:func:`measure`), and :func:`inflate` bounds the decompressed blob. Protects
against: code run by loading, decompression bombs, reference bombs. Does not protect against: a JSON text
that is huge but within the limits (the caller's limits on tests apply after).
More: docs/data.md, "Code benchmarks".
"""

from __future__ import annotations

import io
import pickle
import pickletools
import zlib
from typing import Any


class UnsafePickle(ValueError):
    """A pickle refused: it names a global, builds more than plain data, is unreadable or passes a limit."""


MAX_DECOMPRESSED = 512 * 2**20
"""Largest decompressed test blob read (a LiveCodeBench private-test field): more is refused, not read."""
MAX_TEST_CHARS = MAX_DECOMPRESSED
"""Most text (characters of strings, bytes) a pickled test field may build, each reference counted as the
copy it becomes when the tests are written out: a pickle may reference one string many times (2,048
references to one 1 MiB test are a 1 KiB row and a 2 GiB record). A pickled string, what LiveCodeBench
stores, is never over it (the blob cap bounds it)."""
MAX_PICKLE_ITEMS = 1_000_000
"""Most opcodes a pickled test field may have (checked by a scan before anything is built, so what
unpickling builds is bounded by it and the blob's size), and most values what it builds may hold, each
reference counted (a structure that references itself, or shares parts, grows per reference).
LiveCodeBench's fields are one pickled string: a handful of opcodes."""


class _NoGlobals(pickle.Unpickler):
    """An unpickler that builds plain data only: any class, function or global is refused.

    A pickled string (what LiveCodeBench stores) needs no global; anything that names one could run code
    when loaded, so it never loads here."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickle(f"pickle names a global ({module}.{name}); only plain data is read")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickle("pickle has a persistent id; only plain data is read")


_LENGTH_BYTES = {
    pickletools.TAKEN_FROM_ARGUMENT1: (1, False),
    pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
    pickletools.TAKEN_FROM_ARGUMENT4U: (4, False),
    pickletools.TAKEN_FROM_ARGUMENT8U: (8, False),
}
_OPS = {op.code.encode("latin-1")[0]: op for op in pickletools.opcodes}
_NAMES_GLOBAL = frozenset({"GLOBAL", "STACK_GLOBAL", "INST", "EXT1", "EXT2", "EXT4"})
_NOT_DATA = frozenset(
    {"REDUCE", "BUILD", "OBJ", "NEWOBJ", "NEWOBJ_EX", "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER"}
)


def scan_pickle(data: bytes) -> None:
    """The streaming guard: walk a pickle's opcodes without building anything (a string's bytes are skipped,
    not read), refusing more than :data:`MAX_PICKLE_ITEMS` of them or an opcode that builds anything but
    plain data. Stops at ``STOP``, at a global (the unpickler's ``find_class`` names it) and at anything
    unreadable (the unpickler says so)."""
    pos, n, ops = 0, len(data), 0
    while pos < n:
        op = _OPS.get(data[pos])
        if op is None or op.name in _NAMES_GLOBAL or op.name == "STOP":
            return
        if op.name in _NOT_DATA:
            raise UnsafePickle(f"pickle has a {op.name} opcode; only plain data is read")
        ops += 1
        if ops > MAX_PICKLE_ITEMS:
            raise UnsafePickle(f"pickle has over {MAX_PICKLE_ITEMS:,} opcodes; refused")
        pos += 1
        size = op.arg.n if op.arg is not None else 0
        if size == pickletools.UP_TO_NEWLINE:
            end = data.find(b"\n", pos)
            pos = n if end < 0 else end + 1
        elif size in _LENGTH_BYTES:
            width, signed = _LENGTH_BYTES[size]
            length = int.from_bytes(data[pos : pos + width], "little", signed=signed)
            pos += width + max(length, 0)
        else:
            pos += size


def measure(obj: Any) -> None:
    """Refuse unpickled data whose values, or whose text, counted per reference (what writing it out or
    copying it per test makes of shared parts), pass :data:`MAX_PICKLE_ITEMS` or :data:`MAX_TEST_CHARS`.
    The walk itself stops at the first limit, so a self-referencing structure ends it too."""
    values = chars = 0
    stack = [obj]
    while stack:
        v = stack.pop()
        values += 1
        if values > MAX_PICKLE_ITEMS:
            raise UnsafePickle(
                f"pickled tests hold over {MAX_PICKLE_ITEMS:,} values (each shared reference "
                "counted); refused"
            )
        if isinstance(v, (str, bytes, bytearray)):
            chars += len(v)
            if chars > MAX_TEST_CHARS:
                raise UnsafePickle(
                    f"pickled tests hold over {MAX_TEST_CHARS // 2**20} MiB of text (each shared "
                    "reference counted as the copy it becomes); refused"
                )
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(v)


def restricted_loads(data: bytes) -> Any:
    """Unpickle plain data (str, bytes, numbers, lists, dicts, tuples) and nothing else; raises
    :class:`UnsafePickle` for a pickle that names any global, that is not a pickle, or that has more
    opcodes than :data:`MAX_PICKLE_ITEMS` (scanned before anything is built, :func:`scan_pickle`).

    >>> restricted_loads(pickle.dumps("[1]"))
    '[1]'
    >>> restricted_loads(pickle.dumps(print))
    Traceback (most recent call last):
    ...
    e2c.data.safe_pickle.UnsafePickle: pickle names a global (builtins.print); only plain data is read
    """
    scan_pickle(data)
    try:
        return _NoGlobals(io.BytesIO(data)).load()
    except UnsafePickle:
        raise
    except Exception as e:  # a truncated or foreign blob: UnpicklingError, EOFError, ValueError, ...
        raise UnsafePickle(f"not a readable pickle ({type(e).__name__})") from None


def inflate(raw: bytes) -> bytes:
    """zlib-inflate ``raw``, refusing more than :data:`MAX_DECOMPRESSED` bytes of output (read no further)."""
    d = zlib.decompressobj()
    out = d.decompress(raw, MAX_DECOMPRESSED + 1)
    if len(out) > MAX_DECOMPRESSED or d.unconsumed_tail:
        raise UnsafePickle(f"compressed tests inflate past {MAX_DECOMPRESSED // 2**20} MiB; refused")
    return out
