# python -m e2c.study: the command is e2c/study/cli.py
from e2c.commandline.entry import run_main
from e2c.study.cli import main

run_main(main)
