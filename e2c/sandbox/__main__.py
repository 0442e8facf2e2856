"""``python -m e2c.sandbox check [--sandbox SPEC]``: build the backend, run a trivial program through it, and
say what it isolates here. Exit 0 when it answers; one line and exit 2 when it does not (a readiness check
for launchers: run it before training)."""

from __future__ import annotations

import os
import sys

from e2c.cli import ArgumentParser
from e2c.errors import UserError, fail
from e2c.sandbox import SANDBOX_ENV, SANDBOX_HELP, Limits, make, parse_spec


def ready(spec_text: str | None, tries: int = 1, wait_s: float = 2.0) -> str:
    """Run ``print(1)`` through the backend (up to ``tries`` times, ``wait_s`` apart, for a server that is
    starting); its description and the run's seconds, or a :class:`UserError` naming the backend."""
    import time

    spec = parse_spec(spec_text)
    sbx = make(spec)
    last = ""
    for i in range(tries):
        r = sbx.run({"main.py": "print(1)"}, "main.py", "", Limits(wall_s=10))
        if r.status == "ok" and r.stdout.strip() == "1":
            return f"{sbx.describe()}; print(1) ran in {r.seconds:.3f} s"
        last = (r.stderr.strip().splitlines() or [r.status])[-1]
        if i + 1 < tries:
            time.sleep(wait_s)
    raise UserError(f"sandbox {spec} does not run programs: {last[:300]}")


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
        print(ready(args.sandbox, args.tries, args.wait))
    except UserError as e:
        fail(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
