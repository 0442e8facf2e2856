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
import signal
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from bad_values import NON_UTF8, BadValueContext, bad_values_of

from e2c.commandline.argtypes import ValueType
from e2c.commandline.entry import CHECK_ONLY_ENV, guarded

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


@contextlib.contextmanager
def captured_output() -> Iterator[list[str]]:
    """Capture stdout and stderr at the file-descriptor level (Python's writes, C libraries' and child
    processes'); the list holds ``[stdout, stderr]`` once the block ends."""
    result: list[str] = []
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        files = (out_file, err_file)
        saved_fds = [os.dup(1), os.dup(2)]
        saved_streams = (sys.stdout, sys.stderr)
        streams = [
            io.TextIOWrapper(os.fdopen(os.dup(f.fileno()), "wb"), encoding="utf-8", errors="surrogateescape",
                             write_through=True)
            for f in files
        ]  # fmt: skip
        try:
            os.dup2(out_file.fileno(), 1)
            os.dup2(err_file.fileno(), 2)
            sys.stdout, sys.stderr = streams
            yield result
        finally:
            for stream in streams:
                stream.flush()
            sys.stdout, sys.stderr = saved_streams
            for fd, saved in ((1, saved_fds[0]), (2, saved_fds[1])):
                os.dup2(saved, fd)
                os.close(saved)
            for stream in streams:
                stream.close()
            for f in files:
                f.seek(0)
                result.append(f.read().decode("utf-8", errors="replace"))


IN_PROCESS_LIMIT_S = 120.0  # far above any refusal's time (verl's import included: about 10 s)


class InProcessTimeout(BaseException):
    """An in-process case ran past its wall-clock limit (a BaseException: the entry guard lets it through)."""


def call_main(
    main: Callable[..., int | None],
    argv: list[str],
    env: dict[str, str],
    *,
    prog: str = "fuzz",
    rerun: str | None = None,
    argv0: str = "fuzz",
    stdin: str = "",
    replace_env: bool = False,
    limit_s: float = IN_PROCESS_LIMIT_S,
) -> Outcome:
    """``main(argv)`` under the guard every entry point's ``run_main`` puts around it, in this process, from
    the repository root, with ``env`` added to the environment (``replace_env``: as the whole of it), output
    captured at the file-descriptor level (:func:`captured_output`). The environment, working folder,
    ``sys.argv``, stdin and the signal handlers are put back afterwards.

    A case that runs past ``limit_s`` of wall clock raises :class:`InProcessTimeout` (from SIGALRM, which
    the guard does not catch): a refusal that hangs fails its test instead of hanging the suite."""
    saved_env, saved_cwd, saved_argv, saved_stdin = dict(os.environ), os.getcwd(), sys.argv, sys.stdin
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
    if replace_env:
        os.environ.clear()
    os.environ.update(env)
    os.chdir(ROOT)
    sys.argv = [argv0, *argv]
    sys.stdin = io.StringIO(stdin)
    code: int | None

    def over_time(signum: int, frame: object) -> None:
        raise InProcessTimeout(f"{prog} {' '.join(argv)[:200]}: still running after {limit_s:g} s")

    signal.signal(signal.SIGALRM, over_time)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        with captured_output() as out, warnings.catch_warnings():
            try:
                code = guarded(lambda: main(argv), prog, rerun)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, int) and e.code is not None:
                    print(e.code, file=sys.stderr)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        sys.stdin = saved_stdin
        for s, h in handlers.items():
            signal.signal(s, h)
    return Outcome(code, out[1], out[0])


def run_in_process(main: Callable[..., int | None], argv: list[str], env: dict[str, str]) -> Outcome:
    """``main(argv)`` under the guard, check-only (:func:`call_main`)."""
    return call_main(main, argv, {CHECK_ONLY_ENV: "1", **env})


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
