#!/usr/bin/env bash
# Elastic Reasoning's evaluation command, accepted as its README types it (python -m e2c.eval.elastic):
#
#   ./scripts/eval/eval_model.sh --model M --datasets aime math amc minerva olympiad_bench --output-dir D \
#       --n 16 --tp 1 --e1-mode True --e1-thinking-length 1024 --e1-solution-length 1024
#   ./scripts/eval/eval_model.sh --model M --datasets aime --e1-mode False --max-length 32768
#
# E1 mode is the toolkit's two-phase budgeted generation (thinking -> --explore-budget, solution ->
# --execute-budget); the translated e2c.eval.run command is printed first. Other flags pass through.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../_venv.sh"
cd "$ROOT"
exec "$PY" -m e2c.eval.elastic "$@"
