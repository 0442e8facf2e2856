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
