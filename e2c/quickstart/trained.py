"""The quickstart's trained model, for the demo: ``python -m e2c.quickstart.trained [--out DIR]``.

Prints, NUL-separated, the ``example_inference.py`` arguments that show a trained chain: the model of the
last finished training stage (RL, else SFT) and the first held-out synthetic problem with its answer.
Prints nothing (exit 0) when the output folder holds no finished training stage, so the demo falls back to
the untrained embedded model.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from e2c.commandline.argtypes import TEXT
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.paths import project_root
from e2c.quickstart.config import Config
from e2c.quickstart.stages import Context, read_done, rl_model, sft_model


def trained_model(out: Path) -> tuple[Path, str] | None:
    """``(model folder, "rl" | "sft")`` of the last finished training stage under ``out``, or None."""
    ctx = Context(Config(), out)
    rl = read_done(ctx.dir("rl"))
    if rl is not None and not rl.get("skipped"):
        try:
            model = rl_model(ctx)
        except UserError:
            model = None
        if model is not None:
            return model, "rl"
    if read_done(ctx.dir("sft")) is not None and (sft_model(ctx) / "config.json").is_file():
        return sft_model(ctx), "sft"
    return None


def first_heldout(out: Path) -> tuple[str, str] | None:
    """The first held-out synthetic problem and its answer, or None."""
    path = out / "data" / "eval" / "synthetic.parquet"
    if not path.is_file():
        return None
    import pandas as pd

    df = pd.read_parquet(path, columns=["problem", "answer"])
    return (str(df["problem"].iloc[0]), str(df["answer"].iloc[0])) if len(df) else None


@dataclass(frozen=True)
class TrainedSettings:
    """The command line: each field is one flag (``python -m e2c.quickstart.trained --help``)."""

    # TEXT, not an existing folder: no quickstart run yet is an answer (nothing printed), not an error
    out: str = field(
        default=Config().out,
        metadata=setting(f"quickstart output folder (default: {Config().out})", flag="--out", value=TEXT),
    )
    with_problem: bool = field(
        default=False, metadata=setting("also print --problem and --answer", flag="--with-problem")
    )


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m e2c.quickstart.trained", description=__doc__.splitlines()[0])
    add_setting_flags(p, TrainedSettings)
    return p


def main(argv: list[str] | None = None) -> int:
    args = from_flags(build_parser().parse_args(argv), TrainedSettings)
    out = Path(args.out).expanduser()
    out = out if out.is_absolute() else project_root() / out
    if os.path.lexists(out) and not out.is_dir():
        raise UserError(f"--out {args.out} exists and is not a folder; give a quickstart output folder")
    checks_done()
    found = trained_model(out)
    if found is None:
        return 0
    model, stage = found
    words = ["--model", str(model)]
    problem = first_heldout(out) if args.with_problem else None
    if problem is not None:
        words += ["--problem", problem[0], "--answer", problem[1]]
    print(
        f"[demo] using the quickstart's {stage.upper()} model {model} (--model embedded: the untrained one)",
        file=sys.stderr,
    )
    sys.stdout.write("\0".join(words) + "\0")
    return 0


if __name__ == "__main__":
    run_main(main)
