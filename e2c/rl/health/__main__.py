# python -m e2c.rl.health: the command is e2c/rl/health/cli.py
from e2c.commandline.entry import run_main
from e2c.rl.health.cli import main

run_main(main)
