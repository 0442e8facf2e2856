#!/usr/bin/env bash
# The whole E2C life cycle in one command, on this machine (no GPU, no hub needed):
#   data -> baseline eval -> SFT (verl) -> pass-rate filter -> GRPO stage 2 (verl) -> evals
#        -> test-time scaling -> [equal-compute SFT control] -> report
#
#   bash scripts/quickstart.sh                 # embedded SmolLM2-135M, outputs/quickstart/report.md (~45 min)
#   bash scripts/quickstart.sh --with-control  # + the control: SFT for the RL stage's trained tokens (~6 min more)
#   bash scripts/quickstart.sh --fast          # the tiny test model at tiny sizes: a few minutes
#   bash scripts/quickstart.sh --from sft      # redo SFT and everything after it
#   bash scripts/quickstart.sh --help          # every flag, with its default
#
# Sets up (or reuses) .venv like scripts/demo.sh, then runs python -m e2c.quickstart. A rerun skips finished
# stages and resumes an interrupted one; a finished stage asked to run with other settings is refused
# (add --from STAGE or --force). The last line printed is one JSON object with the report's paths.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
e2c_setup_venv --vllm
exec "$PY" -m e2c.quickstart "$@"
