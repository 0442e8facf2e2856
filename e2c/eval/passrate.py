"""Door: ``python -m e2c.eval.passrate`` runs :mod:`e2c.rl.passrate` (the filter moved beside RL, its consumer)."""

from e2c.commandline.entry import run_main
from e2c.rl.passrate.cli import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    run_main(main)
