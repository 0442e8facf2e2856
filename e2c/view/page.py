"""The one HTML file: the page's data as JSON inside a ``<script type="application/json">`` block, and the
plain JavaScript (no library, no network) that draws it.

Model text is data. The JSON is escaped so that nothing in it can end the block it sits in (``<``, ``>``
and ``&`` as ``\\u003c``, ``\\u003e``, ``\\u0026``: JSON.parse reads them back as the same characters), and
the script inserts every piece of text with ``textContent``, never ``innerHTML``: a chain holding
``<script>`` shows as text. A Content-Security-Policy forbids every fetch, so the page works offline and
cannot call out.

Large runs stay usable: only the visible page of problems (50 by default) is drawn, and every chain is
folded in ``<details>`` until opened (short ones open).
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

__all__ = ["DATA_ID", "PAGE_SIZE", "build_html", "embed_json", "extract_json"]

DATA_ID = "e2c-data"
PAGE_SIZE = 50

# Characters that would let text inside a <script> block end it or start a comment in it, and the two line
# separators that older JavaScript parsers refuse inside strings.
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def embed_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a script block: no ``<`` (so no ``</script>``), no ``>``, no
    ``&``. These characters only occur inside JSON strings, where the escape means the same character.

    >>> embed_json({"t": "</script>"})
    '{"t": "\\\\u003c/script\\\\u003e"}'
    """
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str)
    for ch, esc in _ESCAPES.items():
        text = text.replace(ch, esc)
    return text


def extract_json(html: str) -> Any:
    """The data block of a page built by :func:`build_html`, parsed (what the tests and tools read back)."""
    start_tag = f'<script type="application/json" id="{DATA_ID}">'
    start = html.index(start_tag) + len(start_tag)
    end = html.index("</script>", start)
    return json.loads(html[start:end])


def build_html(payload: Any, title: str = "E2C run") -> str:
    """The whole page: head, style, the data block and the script. ``title`` is escaped here (it is not
    model text, but a folder name can hold anything)."""
    safe_title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "".join(
        [
            "<!doctype html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n",
            # No fetch of any kind: inline style and script only.
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>\n",
            f"<title>{safe_title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
            "<header id='head'></header>\n<nav id='controls'></nav>\n<main id='problems'>",
            "<p>This page needs JavaScript to draw the run.</p></main>\n",
            f'<script type="application/json" id="{DATA_ID}">',
            embed_json(payload),
            "</script>\n",
            f"<script>\nconst PAGE_SIZE = {PAGE_SIZE};\n{SCRIPT}</script>\n</body>\n</html>\n",
        ]
    )


def _asset(name: str) -> str:
    return files("e2c.view").joinpath(name).read_text(encoding="utf-8")


# Package files, so linters and parsers see them (tests/view: ``node --check`` on the script); inlined into
# every page. The script puts every piece of run text through text() -> textContent; no innerHTML anywhere.
CSS = _asset("page.css")
SCRIPT = _asset("page.js")
