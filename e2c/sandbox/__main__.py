"""``python -m e2c.sandbox check [--sandbox SPEC]``: build the backend, run a trivial program through it, and
say what it isolates here. Exit 0 when it answers; one line and exit 2 when it does not (a readiness check
for launchers: run it before training)."""

from __future__ import annotations

from e2c.argtypes import TEXT, Number, whole
from e2c.cli import ArgumentParser
from e2c.entry import checks_done, run_main
from e2c.sandbox import SANDBOX_HELP, ready, setting


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="python -m e2c.sandbox", description=__doc__)
    ap.add_argument("command", choices=["check"], help="check: run a trivial program through the backend")
    ap.add_argument("--sandbox", type=TEXT, default=None, help=SANDBOX_HELP)
    ap.add_argument(
        "--tries",
        type=whole(1, 10_000),
        default=1,
        help="attempts before giving up (a server that is starting; default 1)",
    )
    ap.add_argument(
        "--wait",
        type=Number(float, low=0.0, high=3600.0),
        default=2.0,
        help="seconds between attempts (default 2)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    spec = setting(args.sandbox)  # the flag, else $E2C_SANDBOX, else local
    checks_done()
    print(ready(spec, args.tries, args.wait))
    return 0


if __name__ == "__main__":
    run_main(main)
