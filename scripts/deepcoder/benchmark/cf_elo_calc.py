#!/usr/bin/env python3
"""Codeforces rating of an evaluation run, as Elastic Reasoning's README (after DeepCoder) types it:

    python scripts/deepcoder/benchmark/cf_elo_calc.py --results_path RUN_FOLDER --pass_n 8

RUN_FOLDER is what ``./scripts/eval/eval_model.sh ... --datasets test_codeforces --n 8 --output-dir RUN_FOLDER``
wrote (or its results.json). The method, its assumptions and every flag: ``e2c/eval/codeforces_elo.py`` and
``--help``.
"""

import sys
from pathlib import Path

# Run as a file from anywhere: the toolkit is three folders up.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from e2c.commandline.entry import run_main
from e2c.eval.codeforces_elo import main

if __name__ == "__main__":
    run_main(main, prog="cf_elo_calc.py")
