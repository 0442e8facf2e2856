# python -m e2c.tts: the command is e2c/tts/cli.py
from e2c.commandline.entry import run_main
from e2c.tts.cli import main

run_main(main)
