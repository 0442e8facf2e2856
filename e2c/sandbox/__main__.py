# python -m e2c.sandbox: the command is e2c/sandbox/cli.py
from e2c.commandline.entry import run_main
from e2c.sandbox.cli import main

run_main(main)
