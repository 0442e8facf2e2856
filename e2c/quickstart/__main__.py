"""``python -m e2c.quickstart``: see :mod:`e2c.quickstart.cli`."""

from e2c.commandline.entry import run_main
from e2c.quickstart.cli import main

run_main(main)
