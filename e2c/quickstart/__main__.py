# python -m e2c.quickstart: the command is e2c/quickstart/cli.py
from e2c.commandline.entry import run_main
from e2c.quickstart.cli import main

run_main(main)
