"""docs/code.md's containment table is the hostile tests' own output: it names every attack the tests
make, and records no attack that was not held (regenerate it with tests/sandbox/containment_table.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("containment_table", HERE / "containment_table.py")
assert spec is not None and spec.loader is not None
table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(table)


def section() -> str:
    doc = table.DOC.read_text(encoding="utf-8")
    assert table.START in doc and table.END in doc, "docs/code.md has no containment table"
    return doc[doc.index(table.START) : doc.index(table.END)]


def test_table_names_every_hostile_test_cpu() -> None:
    text = section()
    missing = [n for n in table.test_names() if f"`{n}`" not in text]
    assert not missing, f"rerun tests/sandbox/containment_table.py: the table lacks {missing}"


def test_table_records_every_attack_held_cpu() -> None:
    rows = [line for line in section().splitlines() if line.startswith("| ") and "`test_" in line]
    assert rows
    assert not [r for r in rows if "NOT HELD" in r]
    # every attack ran on local (the default backend) here
    assert all(r.split(" | ")[2] != "n/a" for r in rows)
