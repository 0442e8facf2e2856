#!/usr/bin/env python3
"""Regenerate docs/code.md's containment table from the hostile tests (tests/sandbox/test_hostile_cpu.py).

    python tests/sandbox/containment_table.py            # run the tests, rewrite the table in docs/code.md
    python tests/sandbox/containment_table.py --check    # exit 1 if the table lacks an attack of the tests

Each row is one attack (a test, and its case where it has several); each column a backend; each cell what
the test saw: ``held``, ``skipped: why`` or ``NOT HELD``. Run as root with bubblewrap installed for all
three columns (``bwrap`` skips where it is missing; root-only attacks skip without root).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests" / "sandbox" / "test_hostile_cpu.py"
DOC = ROOT / "docs" / "code.md"
START, END = "<!-- containment-table:start -->", "<!-- containment-table:end -->"
BACKENDS = ("local", "bwrap", "fusion")


def test_names() -> list[str]:
    """The hostile tests' function names, in file order."""
    tree = ast.parse(TESTS.read_text(encoding="utf-8"))
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def run_rows() -> list[dict]:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rows.jsonl")
        env = {**os.environ, "E2C_CONTAINMENT_ROWS": path}
        cmd = [sys.executable, "-m", "pytest", str(TESTS), "-q", "-p", "no:cacheprovider"]
        subprocess.run(cmd, cwd=ROOT, env=env, check=False)
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f]


def table(rows: list[dict]) -> str:
    cells: dict[tuple[str, str], dict[str, str]] = {}
    attacks: dict[tuple[str, str], str] = {}
    for r in rows:
        key = (r["test"], r["case"])
        attacks[key] = r["attack"] + (f" ({r['case']})" if r["case"] else "")
        cells.setdefault(key, {})[r["backend"]] = r["outcome"]
    order = {name: i for i, name in enumerate(test_names())}
    lines = [
        "| attack | test | " + " | ".join(BACKENDS) + " |",
        "|---|---|" + "---|" * len(BACKENDS),
    ]
    for key in sorted(cells, key=lambda k: (order.get(k[0], 1 << 30), k[1])):
        row = [attacks[key].replace("|", "\\|"), f"`{key[0]}`"]
        row += [cells[key].get(b, "n/a").replace("|", "\\|") for b in BACKENDS]
        lines.append("| " + " | ".join(row) + " |")
    when = datetime.date.today().isoformat()
    head = (
        f"Made by `python tests/sandbox/containment_table.py` on {when}, {platform.machine()}, "
        f"{'root' if os.geteuid() == 0 else 'not root'}; n/a: the attack is not run on that backend."
    )
    return "\n".join([START, head, "", *lines, END])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only check that the table names every attack")
    args = ap.parse_args()
    doc = DOC.read_text(encoding="utf-8")
    if args.check:
        missing = [n for n in test_names() if f"`{n}`" not in doc]
        if missing:
            print(f"docs/code.md's containment table lacks {', '.join(missing)}; rerun {Path(__file__).name}")
            return 1
        return 0
    new = table(run_rows())
    if START in doc and END in doc:
        doc = doc[: doc.index(START)] + new + doc[doc.index(END) + len(END) :]
    else:
        doc = doc.rstrip("\n") + "\n\n## Containment, as tested\n\n" + new + "\n"
    DOC.write_text(doc, encoding="utf-8")
    print(f"wrote the containment table into {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
