"""The page of ``python -m e2c.view`` in a real browser: headless chromium loads the file (``--dump-dom``, no
Python package needed), the script draws the problems, and the ``<script>`` a model wrote shows as text
and never runs (it would set the page's title). Skips, naming why, when no chromium binary is here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from view.test_view_cpu import SCRIPT, rows, write_run

from e2c.view import write_view
from e2c.view.browser import chromium_on_path


def dump_dom(page: Path, tmp: Path) -> str:
    """The page's DOM after its scripts ran, as headless chromium prints it."""
    cmd = [
        chromium_on_path() or "chromium",
        "--headless",
        "--no-sandbox",  # the tests may run as root, where chromium's sandbox refuses to start
        "--disable-gpu",
        f"--user-data-dir={tmp / 'profile'}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.mark.slow
@pytest.mark.skipif(
    chromium_on_path() is None, reason="no chromium binary on PATH (apt-get install chromium)"
)
def test_the_page_draws_and_model_scripts_do_not_run_browser(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", rows())
    b = write_run(tmp_path / "b", rows(flip=True))
    write_view([a], tmp_path / "one.html", ["A"])
    dom = dump_dom(tmp_path / "one.html", tmp_path)
    assert re.search(r"<title>E2C: A</title>", dom), dom[:500]  # the model's script would retitle the page
    assert "pwned" not in dom.split("</title>")[0]
    assert dom.count('class="problem"') == 3
    for pid in ("toy / p0", "toy / p1", "toy / p2"):
        assert pid in dom
    shown = SCRIPT.replace("<", "&lt;").replace(">", "&gt;")
    assert shown in dom  # drawn as text in the exploration
    assert "<script>alert(1)</script>" not in dom  # never an element
    assert "malformed: truncated_exploration" in dom and "tests passed: 3 / 4" in dom
    assert "&lt;/EXPLORATION&gt;" in dom  # the tags shown as such

    write_view([a, b], tmp_path / "two.html", ["A", "B"])
    dom = dump_dom(tmp_path / "two.html", tmp_path)
    assert "gained 1, lost 1" in dom
    first = dom.index("toy / p0")
    assert first < dom.index("toy / p2") < dom.index("toy / p1")  # gained, lost, then the rest
