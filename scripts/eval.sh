#!/usr/bin/env bash
# Evaluate a model on math / medical benchmarks (python -m e2c.eval.run; every flag: --help).
#
#   bash scripts/eval.sh                                   # released E2C-Qwen3-8B on GSM8K, 8 samples (GPU + hub)
#   bash scripts/eval.sh --dataset all --gpus 8            # the 8 math sets, vLLM tensor parallel 8
#   bash scripts/eval.sh --model embedded --dataset gsm8k --data-dir ../shared/data/benchmarks \
#       --limit 10 --sample 2 --max-tokens 256             # CPU, no hub: about 1-2 min on 2 cores
#
# Paper defaults: temperature 1.0, 8 samples, 8,192 new tokens (math) / 1,500 (medical). Results go to
# --save-path (default outputs/eval/<model>/<settings>/): config.json, predictions/<dataset>.jsonl,
# results.json. Re-running the same command resumes a killed run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${E2C_VENV:-$ROOT/.venv}"
PY="python"
if [ -x "$VENV/bin/python" ]; then PY="$VENV/bin/python"; fi
cd "$ROOT"
exec "$PY" -m e2c.eval.run "$@"
