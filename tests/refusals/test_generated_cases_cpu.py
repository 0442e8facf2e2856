"""The generated bad-input test: every entry point's every flag, a family of bad values by its
declared type, each refused with exit 2, exactly one ``error:`` line, no traceback, and nothing already
written changed. The cases come from the parsers themselves (:mod:`entry_fuzz`); a new flag is covered by
construction, and a new entry point must be registered (the registry test fails until it is).

``E2C_FUZZ_REPORT=path`` writes the case and pass counts per entry point as JSON.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bad_values import FAMILIES, qualified
from entry_fuzz import (
    ROOT,
    bad_values,
    contract_broken,
    fill,
    load,
    make_context,
    run_in_process,
    snapshot,
    valued_flags,
)
from fuzz_entries import ENTRIES, NOT_ENTRY_POINTS

from e2c.commandline.argtypes import ValueType
from e2c.commandline.parsing import ArgumentParser

MAIN_GUARD = re.compile(r'^if __name__ == "__main__":\n(.*)', re.M)


def _scripts() -> list[Path]:
    files = [
        *ROOT.glob("e2c/**/*.py"),
        *ROOT.glob("bench/*.py"),
        *ROOT.glob("tts/**/*.py"),
        *ROOT.glob("*.py"),
    ]
    return sorted(f for f in files if MAIN_GUARD.search(f.read_text(encoding="utf-8")))


def _target(path: Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "e2c":
        return ".".join(rel.with_suffix("").parts).removesuffix(".__main__")
    return str(rel)


def test_every_entry_point_is_registered_and_guarded_cpu() -> None:
    """Each module that can run as a program is in the registry (or named as internal, with why) and ends
    with the one guard, ``run_main(main)``."""
    problems = []
    for path in _scripts():
        target = _target(path)
        if target in NOT_ENTRY_POINTS:
            continue
        if target not in ENTRIES:
            problems.append(f"{target}: not registered in tests/fuzz_entries.py")
        body = MAIN_GUARD.search(path.read_text(encoding="utf-8")).group(1)
        if "run_main(main" not in body:
            problems.append(f"{target}: its __main__ block does not call run_main(main)")
    assert not problems, "\n".join(problems)
    assert len(ENTRIES) >= 30


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_valued_flag_declares_its_values_cpu(name: str) -> None:
    """A flag that takes a value has choices or a type from :mod:`e2c.commandline.argtypes` (or is named free text)."""
    entry = ENTRIES[name]
    mod = load(entry.target)
    parser = mod.build_parser()
    assert isinstance(parser, ArgumentParser), (
        f"{name}: build_parser() must return e2c.commandline.parsing.ArgumentParser"
    )
    untyped = [
        flag
        for flag, action in valued_flags(parser)
        if action.choices is None
        and not isinstance(action.type, ValueType)
        and flag not in entry.free
        and flag not in entry.skip
    ]
    assert not untyped, f"{name}: flags with no declared values: {untyped}"
    stale = [f for f in [*entry.free, *entry.skip] if f not in dict(valued_flags(parser))]
    assert not stale, f"{name}: registry names flags the parser does not have: {stale}"


def test_every_bad_value_family_names_a_type_in_use_cpu() -> None:
    """Each family in ``tests/bad_values.py`` is keyed by a value type some entry point declares (a renamed
    or moved type would otherwise silently fall back to the base family)."""
    used = {
        qualified(cls)
        for entry in ENTRIES.values()
        for _, action in valued_flags(load(entry.target).build_parser())
        if isinstance(action.type, ValueType)
        for cls in type(action.type).__mro__
    }
    stale = sorted(set(FAMILIES) - used)
    assert not stale, f"families of types no entry point declares: {stale}"


@pytest.fixture(scope="module")
def report():
    counts: dict[str, dict[str, int]] = {}
    yield counts
    path = os.environ.get("E2C_FUZZ_REPORT")
    if path:
        total = {
            "cases": sum(c["cases"] for c in counts.values()),
            "pass": sum(c["pass"] for c in counts.values()),
        }
        Path(path).write_text(json.dumps({"entries": counts, "total": total}, indent=1) + "\n")


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_bad_values_are_refused_in_one_line_cpu(name: str, tmp_path: Path, report) -> None:
    """The good command passes every check (``checks passed``); then every flag's every bad value, added
    to it, is refused by the contract, and the earlier file and folder are unchanged."""
    entry = ENTRIES[name]
    mod = load(entry.target)
    ctx = make_context(tmp_path / "ctx")
    good = fill(entry.good, ctx, tmp_path)
    ok = run_in_process(mod.main, good, entry.env)
    assert ok.code == 0 and "checks passed" in ok.stderr, (good, ok.code, ok.stderr[-2000:], ok.stdout[-500:])
    before = snapshot(ctx.file, ctx.folder)
    failures, cases = [], 0
    for flag, action in valued_flags(mod.build_parser()):
        if flag in entry.skip:
            continue
        for bad in bad_values(action, ctx):
            cases += 1
            outcome = run_in_process(mod.main, [*good, flag, bad], entry.env)
            why = contract_broken(outcome)
            if why:
                failures.append(f"{flag} {bad[:40]!r}: {why}")
    report[name] = {"cases": cases, "pass": cases - len(failures)}
    assert snapshot(ctx.file, ctx.folder) == before, f"{name}: a refused command changed earlier files"
    assert not failures, f"{name}: {len(failures)} of {cases} cases break the contract:\n" + "\n".join(
        failures
    )


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_a_real_process_keeps_the_contract_cpu(name: str, tmp_path: Path) -> None:
    """One bad value per entry point through a real process (the in-process run cannot see what the
    interpreter itself prints): exit 2, one line, no traceback."""
    entry = ENTRIES[name]
    mod = load(entry.target)
    ctx = make_context(tmp_path / "ctx")
    flags = [
        (f, a) for f, a in valued_flags(mod.build_parser()) if f not in entry.skip and bad_values(a, ctx)
    ]
    if not flags:
        pytest.skip(f"{name} has no fuzzed flag")
    flag, action = flags[0]
    argv = [*fill(entry.good, ctx, tmp_path), flag, bad_values(action, ctx)[-1]]
    cmd = (
        [sys.executable, entry.target]
        if entry.target.endswith(".py")
        else [sys.executable, "-m", entry.target]
    )
    env = {**os.environ, **entry.env, "HF_HUB_OFFLINE": "1", "E2C_CHECK_ONLY": "1"}
    r = subprocess.run([*cmd, *argv], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (r.returncode, r.stderr)
