"""The viewer's script and style are package files (e2c/view/page.js, page.css) checked by real parsers:
a syntax error fails here rather than in a user's browser. ``node --check`` for the script (CI installs
nodejs; the test skips, naming it, where there is none) and tinycss2 for the style."""

from __future__ import annotations

import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

import pytest
import tinycss2

from e2c.view.page import CSS, SCRIPT, build_html

NODE = shutil.which("node") or shutil.which("nodejs")
needs_node = pytest.mark.skipif(NODE is None, reason="no node binary (apt-get install nodejs)")
ASSETS = files("e2c.view")


def node_check(path: Path) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    return subprocess.run([NODE, "--check", str(path)], capture_output=True, text=True, timeout=60)


def css_errors(text: str) -> list[str]:
    errors = []
    for rule in tinycss2.parse_stylesheet(text, skip_whitespace=True, skip_comments=True):
        if rule.type == "error":
            errors.append(rule.message)
        elif rule.type == "qualified-rule":
            for decl in tinycss2.parse_declaration_list(
                rule.content, skip_whitespace=True, skip_comments=True
            ):
                if decl.type == "error":
                    errors.append(f"{tinycss2.serialize(rule.prelude).strip()}: {decl.message}")
    return errors


def test_the_page_inlines_the_package_files_cpu():
    html = build_html({"problems": []})
    assert ASSETS.joinpath("page.js").read_text(encoding="utf-8") == SCRIPT and SCRIPT in html
    assert ASSETS.joinpath("page.css").read_text(encoding="utf-8") == CSS and CSS in html
    assert "innerHTML" not in SCRIPT  # run text goes in through textContent only


@needs_node
def test_the_script_parses_cpu(tmp_path):
    # As the page runs it: PAGE_SIZE is declared just before the file, inside the same <script>.
    page = tmp_path / "page.js"
    page.write_text("const PAGE_SIZE = 50;\n" + SCRIPT, encoding="utf-8")
    r = node_check(page)
    assert r.returncode == 0, r.stderr


@needs_node
def test_node_check_catches_a_syntax_error_cpu(tmp_path):
    broken = tmp_path / "broken.js"
    broken.write_text(SCRIPT.replace("function", "function (", 1), encoding="utf-8")
    r = node_check(broken)
    assert r.returncode != 0 and "SyntaxError" in r.stderr


def test_the_style_parses_cpu():
    assert css_errors(CSS) == []
    rules = [r for r in tinycss2.parse_stylesheet(CSS, skip_whitespace=True) if r.type == "qualified-rule"]
    assert len(rules) >= 15


def test_the_style_check_catches_a_broken_rule_cpu():
    for broken in (".x{color red}", ".x{:red}", ".y{a:b}}"):
        assert css_errors(CSS + "\n" + broken) != [], broken
