"""Test-time scaling, as the paper's command runs it: ``python tts/run_tts.py --config tts/config/tts.yaml``.

A shim: the program is :mod:`e2c.tts.cli` (``python -m e2c.tts``), with the same flags, defaults,
outputs and exit codes; only its name in usage lines and in the printed resume command is this file's.
Run it with the package installed (``pip install -e .``, which ``tts/requirements.txt`` does), from the
project folder or from ``tts/`` (``python run_tts.py``), or as ``python -m tts.run_tts`` from the checkout.
"""

from __future__ import annotations

import sys

from e2c.commandline.entry import run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.tts.cli import build_parser as _build_parser
from e2c.tts.cli import load_config, out_root, set_value
from e2c.tts.cli import main as _main

PROG = "tts/run_tts.py"

__all__ = ["PROG", "build_parser", "load_config", "main", "out_root", "parse_args", "set_value"]


def build_parser(prog: str = PROG) -> ArgumentParser:
    """``python -m e2c.tts``'s parser, under this file's name (usage and error lines say what was typed)."""
    return _build_parser(prog)


def parse_args(argv: list[str] | None = None):
    """The flags of ``python -m e2c.tts``, under this file's name."""
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``python -m e2c.tts``'s main; a resume command reruns this file as it was typed."""
    return _main(argv, prog=PROG, entry=[sys.argv[0]])


if __name__ == "__main__":
    run_main(main)
