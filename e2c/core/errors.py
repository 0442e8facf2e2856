"""The toolkit's error types, on the ground floor: every layer raises them, none of them imports upward.

:class:`UserError` is a problem with the user's input (a flag, a file, a model folder): entry points print
it as one ``error:`` line and exit 2. :class:`Interrupted` is SIGTERM raised as an interrupt, so that a
cluster's kill stops a run the way Ctrl-C does. :func:`fail` prints the line and exits.
"""

from __future__ import annotations

import sys
from typing import NoReturn

__all__ = ["Interrupted", "UserError", "fail"]


class UserError(Exception):
    """A problem with the user's input; printed as one line, exit code 2."""


class Interrupted(KeyboardInterrupt):
    """A SIGTERM, raised as an interrupt so that both stop a run the same way."""


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)
