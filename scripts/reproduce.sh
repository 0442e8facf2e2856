#!/usr/bin/env bash
# The method's result at this scale, from the base model, in one command (no GPU, no hub needed):
#   data -> SFT 120 steps (verl) -> pass-rate filter -> GRPO stage 2 (verl): small_arithmetic and code,
#   24 steps x 4 prompts x 8 samples, lr 2e-5 -> SFT and RL on the 300 held-out problems, greedy and avg@4
#   at T 1.0, paired per problem -> study.md
#
#   bash scripts/reproduce.sh             # embedded SmolLM2-135M: outputs/reproduce/study.md (~2 hours here)
#   bash scripts/reproduce.sh --fast      # the tiny test model at tiny sizes: a few minutes
#   bash scripts/reproduce.sh --seeds 1   # another training seed, beside the kept runs
#   bash scripts/reproduce.sh --with-control  # + SFT alone for as many tokens as SFT + RL (~1 hour more)
#   bash scripts/reproduce.sh --help      # every flag
#
# The study engine (python -m e2c.study) on configs/study/reproduce.toml. A rerun skips finished units and
# resumes an interrupted one; E2C_BASE_DIR=/some/folder keeps the runs outside the checkout.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
e2c_setup_venv --vllm
exec "$PY" -m e2c.study.reproduce "$@"
