#!/usr/bin/env bash
# Set up .venv and run the E2C inference demo on the embedded SmolLM2-135M-Instruct (no GPU, no hub).
#
#   bash scripts/demo.sh                         # a GSM8K-style problem, ~1-2 min on 2 cores the first time
#   bash scripts/demo.sh --problem "What is 17*23?" --max_tokens 256
#
# The first run converts the packaged GGUF model to an HF folder in ~/.cache/e2c (about 40 s).
# Extra flags go to example_inference.py (python example_inference.py --help).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup_env.sh
VENV="${E2C_VENV:-$ROOT/.venv}"
exec "$VENV/bin/python" example_inference.py --model_path embedded "$@"
