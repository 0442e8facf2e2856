"""``python -m e2c.sandbox check [--sandbox SPEC]``: build the backend, run a trivial program through it, and
say what it isolates here. Exit 0 when it answers; one line and exit 2 when it does not (a readiness check
for launchers: run it before training)."""

from __future__ import annotations

from dataclasses import dataclass, field

from e2c.commandline.argtypes import TEXT, Number, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, from_flags
from e2c.commandline.flags import setting as declare
from e2c.commandline.parsing import ArgumentParser
from e2c.sandbox import SANDBOX_HELP, ready, setting


@dataclass(frozen=True)
class CheckSettings:
    """The command line: each field is one flag (``python -m e2c.sandbox --help``)."""

    command: str = field(
        default="check",
        metadata=declare(
            "check: run a trivial program through the backend", flag="command", choices=["check"]
        ),
    )
    sandbox: str | None = field(default=None, metadata=declare(SANDBOX_HELP, flag="--sandbox", value=TEXT))
    tries: int = field(
        default=1,
        metadata=declare(
            "attempts before giving up (a server that is starting; default 1)",
            flag="--tries",
            value=whole(1, 10_000),
        ),
    )
    wait: float = field(
        default=2.0,
        metadata=declare(
            "seconds between attempts (default 2)", flag="--wait", value=Number(float, low=0.0, high=3600.0)
        ),
    )


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="python -m e2c.sandbox", description=__doc__)
    add_setting_flags(ap, CheckSettings)
    return ap


def main(argv: list[str] | None = None) -> int:
    s = from_flags(build_parser().parse_args(argv), CheckSettings)
    spec = setting(s.sandbox)  # the flag, else $E2C_SANDBOX, else local
    checks_done()
    print(ready(spec, s.tries, s.wait))
    return 0


if __name__ == "__main__":
    run_main(main)
