# python -m e2c.claims: the command is e2c/claims/cli.py
from e2c.claims.cli import main
from e2c.commandline.entry import run_main

run_main(main)
