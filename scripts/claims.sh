#!/usr/bin/env bash
# The E2C paper's three claims, tested at laptop scale on this machine (no GPU, no hub needed):
#   start (a quickstart run: data, SFT, pass-rate filter, GRPO stage 2, evals)
#     -> 1. exploration weighting: GRPO stage 2 at coefficients 2.0 and 1.0, 3 seeds each, same SFT model
#     -> 2. test-time scaling: self-consistency vs E2C search (K = 1, 2, 4, 8) on 100 held-out problems
#     -> 3. exploration-only adaptation: EF-SFT vs full SFT vs nothing on a family held out of SFT and RL
#     -> report: each claim's table, interval and verdict (supported / not supported / not resolvable)
#
#   bash scripts/claims.sh                # embedded SmolLM2-135M: outputs/claims/report.md (docs/results.md: its time)
#   bash scripts/claims.sh --fast         # the tiny test model at tiny sizes (CI)
#   bash scripts/claims.sh --from tts     # redo the TTS experiment and the report
#   bash scripts/claims.sh --help         # every flag, with its default
#
# Sets up (or reuses) .venv like scripts/quickstart.sh, then runs python -m e2c.claims. A rerun skips finished
# stages and resumes an interrupted one at the arm, run or evaluation it was in. The last line printed is one
# JSON object with the report's paths and the verdicts.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
e2c_setup_venv --vllm
exec "$PY" -m e2c.claims "$@"
