"""One self-contained HTML page per run: ``python -m e2c.view RUN [RUN2] [--out FILE]``.

:mod:`e2c.view.load` reads an evaluation or TTS run folder into plain data (every chain split by the
project's parser); :mod:`e2c.view.page` writes that data and the script that draws it into one HTML file
that needs no server, no network and no file beside it. See ``docs/view.md``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.files import atomic_write
from e2c.view.load import compare_payload, left_out_line, load_run, single_payload
from e2c.view.page import build_html, extract_json

__all__ = [
    "Page",
    "build_html",
    "compare_payload",
    "extract_json",
    "left_out_line",
    "load_run",
    "page_lines",
    "single_payload",
    "view_payload",
    "write_pages",
    "write_view",
]


def default_labels(folders: Sequence[Path]) -> list[str]:
    """A name per run: its folder's name (the parent's too when two runs share a name)."""
    names = [f.resolve().name or str(f) for f in folders]
    if len(set(names)) < len(names):
        names = [f"{f.resolve().parent.name}/{f.resolve().name}" for f in folders]
    return names


def view_payload(folders: Sequence[Path], labels: Sequence[str] | None = None) -> dict[str, Any]:
    """The page's data for one run, or for two runs side by side (on the problems both hold)."""
    names = list(labels or default_labels(folders))
    loaded = [load_run(f) for f in folders]
    if len(loaded) == 1:
        return single_payload(loaded[0], names[0])
    return compare_payload(loaded[0], loaded[1], names)


def write_page(payload: dict[str, Any], out: Path) -> int:
    """Write the page of ``payload`` to ``out`` atomically; returns its size in bytes."""
    html = build_html(payload, title="E2C: " + " vs ".join(r["label"] for r in payload["runs"]))
    # A lone surrogate in model text is written as its JSON escape (backslash-u), which JSON.parse reads.
    atomic_write(out, lambda f: f.write(html), errors="backslashreplace")
    return len(html.encode("utf-8", "backslashreplace"))


def write_view(folders: Sequence[Path], out: Path, labels: Sequence[str] | None = None) -> dict[str, Any]:
    """Read one or two run folders and write their page to ``out``; returns the page's data. Nothing is
    written before every input has been read."""
    payload = view_payload(folders, labels)
    write_page(payload, out)
    return payload


@dataclass(frozen=True)
class Page:
    """A page a pipeline writes after its runs: its file name, its one or two run folders (the second shown
    against the first), their labels, and a line saying what it shows."""

    name: str
    runs: tuple[Path, ...]
    labels: tuple[str, ...]
    what: str


def write_pages(pages: Sequence[Page], folder: Path, root: Path) -> dict[str, dict[str, str | None]]:
    """Write each page into ``folder``: ``{name: {"path", "what", "note"}}``, ``path`` relative to ``root``.
    A page whose runs cannot be read gets ``path`` None and the reason as its ``note`` (the pages come after
    a report's numbers and never cost them); a comparison that left problems out says how many."""
    out: dict[str, dict[str, str | None]] = {}
    for page in pages:
        target = folder / page.name
        try:
            payload = view_payload(list(page.runs), list(page.labels))
            folder.mkdir(parents=True, exist_ok=True)
            write_page(payload, target)
        except (UserError, OSError) as e:
            out[page.name] = {"path": None, "what": page.what, "note": str(e)}
            continue
        out[page.name] = {
            "path": os.path.relpath(target, root),
            "what": page.what,
            "note": left_out_line(payload),
        }
    return out


def page_lines(written: Mapping[str, Mapping[str, str | None]]) -> list[str]:
    """A report's "Pages" section (markdown): a link per page, in the order written; [] with no page."""
    if not written:
        return []
    lines = [
        "## Pages\n",
        "Every chain of the run, readable in the browser (one self-contained file each, `python -m e2c.view`): "
        "phases split and coloured, verdicts and malformations marked, filters and search.\n",
    ]
    for name, p in written.items():
        if p["path"]:
            lines.append(f"- [{name}]({p['path']}): {p['what']}" + (f"; {p['note']}" if p["note"] else ""))
        else:
            lines.append(f"- {name}: not written ({p['note']})")
    return [*lines, ""]
