# python -m e2c.view: the command is e2c/view/cli.py
from e2c.commandline.entry import run_main
from e2c.view.cli import main

run_main(main)
