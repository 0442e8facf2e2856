"""A small file system for the full-disk tests: a tmpfs of a few KiB mounted on a test's folder.

Mounting needs root (or a user namespace, which a test's other processes could not see into), so where
``mount`` fails the test is skipped with the reason. The mount is removed when the test ends.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(folder: Path, kib: int) -> Iterator[Path]:
    """``folder`` (created) as a tmpfs of ``kib`` KiB while the block runs; skips the test where no
    tmpfs can be mounted."""
    folder.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={kib}k,mode=0777", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {(r.stderr or r.stdout).strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
