#!/usr/bin/env bash
# Set up .venv and run the E2C inference demo (no GPU, no hub).
#
#   bash scripts/demo.sh                         # the quickstart's trained model if one exists, else the
#                                                # untrained embedded SmolLM2-135M (~1-2 min the first time)
#   bash scripts/demo.sh --model embedded        # always the untrained embedded model
#   bash scripts/demo.sh --problem "What is 17*23?" --max-tokens 256
#
# With no --model and a finished `bash scripts/quickstart.sh` (outputs/quickstart, $E2C_BASE_DIR/quickstart
# when E2C_BASE_DIR is set, or $E2C_QUICKSTART_OUT),
# the demo uses its RL model (else its SFT model) and, unless --problem is given, its first held-out problem.
# The first run converts the packaged GGUF model to an HF folder in ~/.cache/e2c (about 40 s).
# Extra flags go to example_inference.py (python example_inference.py --help).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
e2c_setup_venv
MODEL_ARGS=(--model embedded)
case " $* " in
  *" --model"*) MODEL_ARGS=() ;;
  *)
    WITH=(--with-problem)
    case " $* " in *" --problem"*) WITH=() ;; esac
    mapfile -d '' FOUND < <("$PY" -m e2c.quickstart.trained --out "${E2C_QUICKSTART_OUT:-${E2C_BASE_DIR:-outputs}/quickstart}" "${WITH[@]}")
    if [ "${#FOUND[@]}" -gt 0 ]; then MODEL_ARGS=("${FOUND[@]}"); fi
    ;;
esac
exec "$PY" example_inference.py "${MODEL_ARGS[@]}" "$@"
