"""The CPU rollout's weight sync through one shared-memory file instead of ray's object store.

The trainer copies each tensor into its slot of one file under ``/dev/shm``, mapped by both processes, and the
call carries only the :class:`Manifest`. :class:`SharedWeightsWriter` keeps one file per layout and removes its
path once the server has mapped it (:meth:`SharedWeightsWriter.forget_path`); a process killed in between
leaves ``/dev/shm/e2c-weights-*``. :func:`read_shared` returns views valid only until the trainer's next write,
so everything the server keeps is copied. Both sides must see one ``/dev/shm``: the adapter checks the
server's ray node first and uses ray otherwise; processes of one node in separate containers fail with the
file not found, so set ``E2C_ROLLOUT_SYNC_VIA=ray`` there.
More: docs/training.md, "Speed on a CPU".
"""

from __future__ import annotations

import mmap
import os
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# Slots start on cache-line boundaries, so every view is aligned for any dtype.
ALIGN = 64
PREFIX = "e2c-weights-"


@dataclass(frozen=True)
class Slot:
    name: str
    dtype: str  # torch's name without "torch.", e.g. "float32"
    shape: tuple[int, ...]
    offset: int
    nbytes: int


@dataclass(frozen=True)
class Manifest:
    """What the server needs to read a sync: the file, its size and each tensor's slot."""

    path: str
    size: int
    slots: tuple[Slot, ...]


def shm_folder() -> Path:
    """``/dev/shm`` where it is a writable folder (memory-backed on Linux), else the temp folder."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


def plan_slots(state: dict[str, torch.Tensor]) -> tuple[tuple[Slot, ...], int]:
    """Each tensor's slot, in the dict's order, every offset a multiple of :data:`ALIGN`; and the total size.

    >>> import torch
    >>> slots, size = plan_slots({"a": torch.zeros(3), "b": torch.zeros(2, dtype=torch.bfloat16)})
    >>> [(s.name, s.dtype, s.shape, s.offset, s.nbytes) for s in slots], size
    ([('a', 'float32', (3,), 0, 12), ('b', 'bfloat16', (2,), 64, 4)], 68)
    """
    slots, offset = [], 0
    for name, t in state.items():
        nbytes = t.numel() * t.element_size()
        slots.append(Slot(name, str(t.dtype).removeprefix("torch."), tuple(t.shape), offset, nbytes))
        offset += -(-nbytes // ALIGN) * ALIGN
    end = slots[-1].offset + slots[-1].nbytes if slots else 0
    return tuple(slots), end


def _view(buf: Any, slot: Slot) -> torch.Tensor:
    import torch

    dtype = getattr(torch, slot.dtype)
    if slot.nbytes == 0:
        return torch.empty(slot.shape, dtype=dtype)
    raw = torch.frombuffer(buf, dtype=torch.uint8, count=slot.nbytes, offset=slot.offset)
    return raw.view(dtype).view(slot.shape)


class SharedWeightsWriter:
    """Trainer side: copies a state dict into the shared file and returns its :class:`Manifest`."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or shm_folder()
        self._layout: tuple[tuple[str, str, tuple[int, ...]], ...] | None = None
        self._map: mmap.mmap | None = None
        self._manifest: Manifest | None = None
        self._path: Path | None = None  # set while the file still has a name

    def write(self, state: dict[str, torch.Tensor]) -> Manifest:
        slots, size = plan_slots(state)
        layout = tuple((s.name, s.dtype, s.shape) for s in slots)
        if layout != self._layout or self._map is None:
            self._open(size, slots)
            self._layout = layout
        assert self._map is not None and self._manifest is not None
        import torch

        with torch.no_grad():
            for slot, tensor in zip(slots, state.values(), strict=True):
                if slot.nbytes:
                    _view(self._map, slot).copy_(tensor)
        return self._manifest

    def _open(self, size: int, slots: tuple[Slot, ...]) -> None:
        self.close()
        path = self.folder / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, max(size, 1))
            self._map = mmap.mmap(fd, max(size, 1))
        except BaseException:
            os.unlink(path)
            raise
        finally:
            os.close(fd)
        self._path = path
        self._manifest = Manifest(str(path), max(size, 1), slots)

    def forget_path(self) -> None:
        """Remove the file's name once the server has mapped it: the memory lives while a mapping does."""
        if self._path is not None:
            self._path.unlink(missing_ok=True)
            self._path = None

    def close(self) -> None:
        self.forget_path()
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a view is still alive; the mapping goes with it
                pass
            self._map = None
        self._layout = self._manifest = None


class SharedWeightsReader:
    """Server side: maps each manifest's file once and reads tensors as views of it."""

    def __init__(self) -> None:
        self._path: str | None = None
        self._map: mmap.mmap | None = None

    def read(self, manifest: Manifest) -> dict[str, torch.Tensor]:
        if manifest.path != self._path or self._map is None:
            with open(manifest.path, "r+b") as f:
                self._map = mmap.mmap(f.fileno(), manifest.size)
            self._path = manifest.path
        return {slot.name: _view(self._map, slot) for slot in manifest.slots}
