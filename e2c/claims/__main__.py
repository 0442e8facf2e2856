"""``python -m e2c.claims``: see :mod:`e2c.claims.cli`."""

from e2c.claims.cli import main
from e2c.commandline.entry import run_main

run_main(main)
