#!/usr/bin/env bash
# e3 curriculum on the E2C RL recipe (python -m e2c.rl.curriculum): stages that couple a difficulty band
# with a response budget, each from the previous stage's checkpoint, validated at 2x its budget.
#
#   bash scripts/e2c_curriculum.sh                              # configs/e2c_curriculum.yaml (e3: 8k easy, 16k harder)
#   bash scripts/e2c_curriculum.sh --model tiny --steps 1   # CPU smoke run (steps per stage)
#
# Env (each has a default):
#   MODEL_PATH   stage-1 start model (default models/checkpoints/sft/final; tiny|embedded|folder|HF id)
#   TRAIN_DATA   RL parquet with extra_info.difficulty (default data/processed/rl/e2c_rl_train.parquet)
#   VAL_DATA     validation parquet (default data/processed/rl/e2c_rl_val.parquet)
#   OUTPUT_DIR   one sub-folder per stage (default models/checkpoints/rl/curriculum)
#   CURRICULUM   the curriculum YAML (default configs/e2c_curriculum.yaml)
# A rerun skips finished stages and resumes a killed one from its latest checkpoint.
# Everything after `--` is passed to Hydra for every stage.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
ARGS=()
[ -n "${CURRICULUM:-}" ] && ARGS+=(--config "$CURRICULUM")
[ -n "${MODEL_PATH:-}" ] && ARGS+=(--model "$MODEL_PATH")
[ -n "${TRAIN_DATA:-}" ] && ARGS+=(--train-data "$TRAIN_DATA")
[ -n "${VAL_DATA:-}" ] && ARGS+=(--val-data "$VAL_DATA")
[ -n "${OUTPUT_DIR:-}" ] && ARGS+=(--output-dir "$OUTPUT_DIR")
# Run from the caller's folder, so relative paths (TRAIN_DATA, OUTPUT_DIR, --model) mean what they say there;
# this checkout's e2c comes first on the path.
e2c_checkout_first
exec "$PY" -m e2c.rl.curriculum "${ARGS[@]}" "$@"
