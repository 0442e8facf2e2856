"""Which headless browser can open a page here: the one list of chromium binaries, used by the viewer's
benchmark (``bench/view.py``) and its browser test."""

from __future__ import annotations

import shutil

BROWSERS = (
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
    "headless_shell",
)


def chromium_on_path() -> str | None:
    """The first chromium-like binary on PATH, None when there is none."""
    return next((p for p in map(shutil.which, BROWSERS) if p), None)
