"""The generated bad-input test's machinery: every entry point, every flag, a family of bad values
by the flag's declared type, each run in-process under ``E2C_CHECK_ONLY=1`` (so a value that slips through
the checks ends the run at ``checks_done()`` instead of starting the work).

An entry point is registered once, in one of the ``fuzz_entries_*.py`` files, with a command line that
passes every check (``good``). Everything else is derived from its parser: a new flag is covered by
construction, and a flag whose value is free text must say so (``free``), or the registry test fails.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from bad_values import NON_UTF8, BadValueContext, bad_values_of

from e2c.argtypes import ValueType
from e2c.entry import CHECK_ONLY_ENV, guarded

ROOT = Path(__file__).resolve().parents[1]
NOT_A_CHOICE = "no-such-choice"


@dataclass(frozen=True)
class Entry:
    """One entry point: ``target`` is a module (``e2c.eval.run``) or a file from the repository root
    (``bench/grader.py``); ``good`` a command line that passes every check (``{tmp}`` is a fresh folder,
    ``{file}`` / ``{folder}`` the context's). ``free``: flags whose value may be any text (each with why).
    ``skip``: flags not fuzzed, each with why. ``env``: environment for the run."""

    target: str
    good: tuple[str, ...] = ()
    free: dict[str, str] = field(default_factory=dict)
    skip: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def load(target: str) -> ModuleType:
    """The entry point's module, imported without running it (a file gets a name of its own)."""
    if target.endswith(".py"):
        path = ROOT / target
        name = "fuzz_" + target.replace("/", "_").removesuffix(".py")
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader, target
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(target)


def valued_flags(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    """(canonical flag, action) for every optional that takes a value (aliases left out)."""
    for action in parser._actions:
        if not action.option_strings or action.nargs == 0 or isinstance(action, argparse._HelpAction):
            continue
        yield action.option_strings[0], action


def bad_values(action: argparse.Action, ctx: BadValueContext) -> list[str]:
    """The family of bad values a flag must refuse, by what it declares."""
    if action.choices is not None:
        return ["", NOT_A_CHOICE, NON_UTF8]
    if isinstance(action.type, ValueType):
        return bad_values_of(action.type, ctx)
    return []


@dataclass
class Outcome:
    code: int | None
    stderr: str
    stdout: str


def run_in_process(main: Callable[..., int | None], argv: list[str], env: dict[str, str]) -> Outcome:
    """``main(argv)`` under the guard, check-only, with stdout and stderr captured."""
    err, out = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in [CHECK_ONLY_ENV, *env]}
    os.environ.update({CHECK_ONLY_ENV: "1", **env})
    cwd = os.getcwd()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code: int | None = guarded(lambda: main(argv), "fuzz")
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, int) and e.code is not None:
                    print(e.code, file=sys.stderr)
    finally:
        os.chdir(cwd)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return Outcome(code, err.getvalue(), out.getvalue())


def contract_broken(o: Outcome) -> str | None:
    """Why an outcome breaks the bad-input contract (exit 2, exactly one ``error:`` line, no traceback)."""
    lines = [ln for ln in o.stderr.strip().splitlines() if ln.strip()]
    if "Traceback" in o.stderr + o.stdout:
        return "traceback"
    if o.code != 2:
        return f"exit {o.code}: {lines[-1][:200] if lines else o.stdout.strip()[-200:]}"
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr: {' | '.join(lines)[:300]}"
    if not lines[0].startswith("error: "):
        return f"not an error line: {lines[0][:200]}"
    return None


def make_context(tmp: Path) -> BadValueContext:
    """A file with content, a folder with an earlier result, and a model folder whose weights are broken."""
    tmp.mkdir(parents=True, exist_ok=True)
    f = tmp / "earlier.txt"
    f.write_text("keep me\n")
    folder = tmp / "earlier-run"
    folder.mkdir(exist_ok=True)
    (folder / "predictions.jsonl").write_text('{"row": 0}\n')
    model = tmp / "broken-model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (model / "model.safetensors").write_bytes(b"this is not a safetensors file at all")
    (model / "tokenizer.json").write_text("{}")
    return BadValueContext(file=str(f), folder=str(folder), broken_model=str(model))


def snapshot(*paths: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for p in map(Path, paths):
        files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
        out.update({str(q): q.read_bytes() for q in files})
    return out


def fill(argv: tuple[str, ...], ctx: BadValueContext, tmp: Path) -> list[str]:
    return [a.format(tmp=tmp, file=ctx.file, folder=ctx.folder) for a in argv]
