#!/usr/bin/env bash
# Evaluate a model on math / medical benchmarks (python -m e2c.eval.run; every flag: --help).
#
#   bash scripts/eval.sh                                   # released E2C-Qwen3-8B on GSM8K, 1 sample (GPU + hub)
#   bash scripts/eval.sh --model models/checkpoints/rl/stage2-main/final --dataset all --sample 8   # the paper's
#   bash scripts/eval.sh --dataset all --gpus 8            # the 8 math sets, 8 data-parallel workers (--tp: GPUs each)
#   bash scripts/eval.sh --model embedded --dataset gsm8k --data-dir ../shared/data/benchmarks \
#       --limit 10 --sample 2 --max-tokens 256             # CPU, no hub: about 1-2 min on 2 cores
#   bash scripts/eval.sh --dataset med --no-prefill --medical-prompt release   # the release's eval prompts
#
# Paper defaults: temperature 1.0, 1 sample (its tables: --sample 8), 8,192 new tokens (math) / 1,500
# (medical). Results go to --output-dir (default evaluation/e2c-eval/<model>/<settings>/): config.json,
# predictions/<dataset>.jsonl,
# results.json. Re-running the same command resumes a killed run.
# Prompts: the question + the release's suffix ("Provide the final answer in the boxed{}. Please reasoning
# step-by-step."), assistant turn prefilled with <EXPLORATION> (as the release's RL and TTS). --no-prefill
# reproduces the release's evaluation script exactly (no prefill; the model writes the tag itself);
# --medical-prompt release adds the release's optional medical system prompt and suffix (medical sets only).
# Both are recorded in config.json: a restart with another setting is refused.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
exec "$PY" -m e2c.eval.run "$@"
