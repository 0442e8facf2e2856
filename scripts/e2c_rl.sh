#!/usr/bin/env bash
# E2C two-stage GRPO on verl (python -m e2c.rl.launch --algo grpo).
#
#   bash scripts/e2c_rl.sh --stage 1                 # warm-up: n=32, T=1.3, coefficient 1.0, 1 epoch
#   bash scripts/e2c_rl.sh --stage 2                 # n=8, T=1.0, exploration advantages x2, 2 epochs,
#                                                    # from stage 1's latest checkpoint (fails if none)
#   bash scripts/e2c_rl.sh --stage 1 --model tiny --steps 2 -- trainer.save_freq=1   # CPU smoke run
#
# Env (each has a default):
#   MODEL_PATH   stage-1 start model (default models/checkpoints/sft/final; tiny|embedded|folder|HF id)
#   TRAIN_DATA   RL parquet (default data/processed/rl/e2c_rl_train.parquet from the config; checked up front)
#   VAL_DATA     validation parquet (default data/processed/rl/e2c_rl_val.parquet)
#   OUTPUT_DIR   run folder (default models/checkpoints/rl/grpo_stage<N>)
#   TOTAL_TRAINING_STEPS  stop after N steps (default: the config's epochs)
#   NNODES       nodes in the ray cluster (default 1); CUDA_VISIBLE_DEVICES picks GPUs (default: all)
# With no GPU the CPU set-up of configs/cpu/rl.yaml is used (hf rollout, small preset); on this 2-core CPU a
# tiny-model step takes a few seconds, an embedded SmolLM2-135M step about a minute.
# Everything after `--` is passed to Hydra, e.g. `-- trainer.save_freq=10 data.train_batch_size=128`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
# Whole numbers, named here: past this point the error would name the flag, not the variable.
for var in TOTAL_TRAINING_STEPS NNODES; do
  val="${!var:-}"
  if [ -n "$val" ] && ! [[ "$val" =~ ^-?[0-9]+$ ]]; then
    echo "error: $var must be a whole number, got '$val'" >&2
    exit 2
  fi
done
ALGO="${E2C_ALGO:-grpo}"
ARGS=(--algo "$ALGO")
[ -n "${MODEL_PATH:-}" ] && ARGS+=(--model "$MODEL_PATH")
[ -n "${TRAIN_DATA:-}" ] && ARGS+=(--train-data "$TRAIN_DATA")
[ -n "${VAL_DATA:-}" ] && ARGS+=(--val-data "$VAL_DATA")
[ -n "${OUTPUT_DIR:-}" ] && ARGS+=(--output-dir "$OUTPUT_DIR")
[ -n "${TOTAL_TRAINING_STEPS:-}" ] && ARGS+=(--steps "$TOTAL_TRAINING_STEPS")
# Run from the caller's folder, so relative paths (TRAIN_DATA, OUTPUT_DIR, --model) mean what they say there;
# this checkout's e2c comes first on the path.
e2c_checkout_first
exec "$PY" -m e2c.rl.launch "${ARGS[@]}" "$@"
