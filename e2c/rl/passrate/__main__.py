# python -m e2c.rl.passrate: the command is e2c/rl/passrate/cli.py
from e2c.commandline.entry import run_main
from e2c.rl.passrate.cli import main

run_main(main)
