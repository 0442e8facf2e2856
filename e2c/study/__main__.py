"""``python -m e2c.study``: see :mod:`e2c.study.cli`."""

from e2c.commandline.entry import run_main
from e2c.study.cli import main

run_main(main)
