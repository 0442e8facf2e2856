"""``python -m e2c.sandbox check [--sandbox SPEC]``: build the backend, run a trivial program through it, and
say what it isolates here. Exit 0 when it answers; one line and exit 2 when it does not (a readiness check
for launchers: run it before training)."""

from __future__ import annotations

import os
import sys

from e2c.cli import ArgumentParser
from e2c.errors import UserError, fail
from e2c.sandbox import SANDBOX_ENV, SANDBOX_HELP, parse_spec, ready


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m e2c.sandbox", description=__doc__)
    ap.add_argument("command", choices=["check"], help="check: run a trivial program through the backend")
    ap.add_argument("--sandbox", default=os.environ.get(SANDBOX_ENV), help=SANDBOX_HELP)
    ap.add_argument(
        "--tries", type=int, default=1, help="attempts before giving up (a server that is starting)"
    )
    ap.add_argument("--wait", type=float, default=2.0, help="seconds between attempts")
    args = ap.parse_args(argv)
    if args.tries < 1 or args.wait < 0:
        fail("--tries must be at least 1 and --wait not negative")
    try:
        print(ready(parse_spec(args.sandbox), args.tries, args.wait))
    except UserError as e:
        fail(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
