"""Helpers shared by the command-line entry points: one-line errors and a non-zero exit."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class UserError(Exception):
    """A problem with the user's input; printed as one line, exit code 2."""


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage dump) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see {self.prog} --help)")


def quiet_transformers() -> None:
    """Keep transformers' weight-loading bars and advisory warnings out of command-line output."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers is a core dependency
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
