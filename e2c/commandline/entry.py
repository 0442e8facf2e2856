"""The one guard around every entry point's ``main``: what a user sees when a run cannot go on.

Every command ends its module with ``run_main(main)``, which turns what ``main`` raises into the contract: a
:class:`e2c.core.errors.UserError` is one ``error:`` line, exit 2; an unhandled interrupt is one line, exit
130 (Ctrl-C) or 143 (SIGTERM); a closed pipe exits quietly; anything else (a bug) is one line naming the
exception and the log file holding its traceback, exit 1 (``E2C_DEBUG=1`` prints it too).
``checks_done()`` marks where an entry point has checked every input; with ``E2C_CHECK_ONLY=1`` the command
stops there (``checks passed``, exit 0), which the generated bad-input test uses so that a value that slips
through the checks never starts a training.
More: docs/bad-input.md, "The contract, and how it is kept".
"""

from __future__ import annotations

import datetime
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from e2c.commandline.parsing import resume_command
from e2c.core.env import env_switch
from e2c.core.errors import Interrupted, UserError
from e2c.core.paths import cache_dir

__all__ = ["CHECK_ONLY_ENV", "DEBUG_ENV", "checks_done", "error_log_dir", "guarded", "run_main"]

CHECK_ONLY_ENV = "E2C_CHECK_ONLY"
DEBUG_ENV = "E2C_DEBUG"
LOG_DIR_ENV = "E2C_LOG_DIR"


def checks_done() -> None:
    """The entry point has checked its inputs; with ``E2C_CHECK_ONLY=1`` stop here (exit 0)."""
    if env_switch(CHECK_ONLY_ENV):
        print("checks passed", file=sys.stderr, flush=True)
        raise SystemExit(0)


def error_log_dir() -> Path:
    """Where unexpected failures write their traceback (``$E2C_LOG_DIR``, else ``<cache>/logs``)."""
    return Path(os.environ.get(LOG_DIR_ENV) or cache_dir() / "logs")


def _write_log(prog: str, text: str) -> Path | None:
    """The traceback in a file of its own; None when no folder takes it (the line then says so)."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"{prog.replace('/', '_').replace(' ', '_')}-{stamp}-{os.getpid()}.log"
    for folder in (error_log_dir(), Path("/tmp")):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            path.write_text(text, encoding="utf-8", errors="backslashreplace")
            return path
        except OSError:
            continue
    return None


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed: nothing left to tell
        pass


def guarded(main: Callable[[], int | None], prog: str, rerun: str | None = None) -> int:
    """Run ``main()`` under the contract above; returns the exit status (SystemExit passes through).
    ``rerun``: the command that runs it again (named when an interrupt stops it)."""
    try:
        code = main()
    except UserError as e:
        _say(f"error: {_first_line(e, 2000) or type(e).__name__}")
        return 2
    except KeyboardInterrupt as e:
        name, status = ("SIGTERM", 143) if isinstance(e, Interrupted) else ("Ctrl-C", 130)
        again = f"; rerun with: {rerun}" if rerun else "; rerun the same command to start again"
        _say(f"interrupted ({name}): {prog} stopped{again}")
        return status
    except BrokenPipeError:
        # stdout went away (`| head`); point it at devnull so the interpreter's own flush stays quiet
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except Exception as e:  # the point of the guard: one line, the traceback in a file
        text = traceback.format_exc()
        log = _write_log(prog, f"{prog} {' '.join(sys.argv[1:])}\n\n{text}")
        if env_switch(DEBUG_ENV):
            _say(text.rstrip())
        where = f"full traceback in {log}" if log else "no folder took the traceback"
        detail = _first_line(e)
        _say(
            f"error: unexpected {type(e).__name__} in {prog}"
            + (f": {detail}" if detail else "")
            + f" ({where}; {DEBUG_ENV}=1 prints it)"
        )
        return 1
    return int(code or 0)


def run_main(main: Callable[[], int | None], prog: str | None = None) -> NoReturn:
    """``sys.exit(guarded(main))``: the last line of every entry point's module."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    module = spec.name.removesuffix(".__main__") if spec and spec.name else None
    name = prog or module or Path(sys.argv[0]).name or "e2c"
    entry = ["-m", module] if module else [sys.argv[0]]
    raise SystemExit(guarded(main, name, resume_command(entry, sys.argv[1:])))
