#!/usr/bin/env bash
# E2C two-stage GRPO on verl (python -m e2c.rl.launch --algo grpo).
#
#   bash scripts/e2c_rl.sh                           # both stages in order, as the paper's script:
#                                                    #   models/checkpoints/rl/stage1-warmup/final, then
#                                                    #   models/checkpoints/rl/stage2-main/final (plain HF models)
#   bash scripts/e2c_rl.sh --stage 1                 # warm-up only: n=32, T=1.3, coefficient 1.0, 1 epoch
#   bash scripts/e2c_rl.sh --stage 2                 # n=8, T=1.0, exploration advantages x2, 2 epochs,
#                                                    # from stage 1's latest checkpoint (fails if none)
#   bash scripts/e2c_rl.sh --stage 2 --explore-adv-coef 1.5   # another exploration weight (e2c.explore_adv_coef;
#                                                    # the old spelling --explore-coef still works)
#   bash scripts/e2c_rl.sh --stage 2 -- e2c.explore_adv_rule=NAME   # a weighting rule registered in
#                                                    # e2c/rl/advantage.py (default: paper)
#   MODEL_PATH=tiny TOTAL_TRAINING_STEPS=2 bash scripts/e2c_rl.sh   # CPU smoke run of both stages
#
# Env (each has a default):
#   MODEL_PATH   stage-1 start model (default models/checkpoints/sft/final; tiny|embedded|folder|HF id)
#   TRAIN_DATA   RL parquet (default data/processed/rl/e2c_rl_train.parquet from the config; checked up front)
#   VAL_DATA     validation parquet (default data/processed/rl/e2c_rl_val.parquet)
#   OUTPUT_DIR   parent of the stage folders stage1-warmup/ and stage2-main/ (default models/checkpoints/rl);
#                --output-dir names one stage's folder exactly (with --stage 1 or 2)
#   TOTAL_TRAINING_STEPS  stop each stage after N steps (default: the config's epochs)
#   N_GPUS       GPUs per node (default: every visible one; at most CUDA_VISIBLE_DEVICES' count); with no
#                GPU, CPU ranks per node: N_GPUS=4 runs 4 FSDP actor ranks and rollout replicas on 4 logical GPUs
#   NNODES       nodes in the ray cluster (default 1)
# Every stage ends with a checkpoint; its HF folder is linked as <stage folder>/final.
# With no GPU the CPU set-up of configs/cpu/rl.yaml is used (hf rollout, small preset); on this 2-core CPU a
# tiny-model step takes a few seconds, an embedded SmolLM2-135M step about a minute.
# Everything after `--` is passed to Hydra (both stages), e.g. `-- trainer.save_freq=10 data.train_batch_size=128`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
# Whole numbers, named here: past this point the error would name the flag, not the variable.
source "$(dirname "${BASH_SOURCE[0]}")/_launch_checks.sh"
e2c_check_whole TOTAL_TRAINING_STEPS 1
e2c_check_whole NNODES 1 4096  # e2c.launch.devices.MAX_NODES
e2c_check_whole N_GPUS 0
ALGO="${E2C_ALGO:-grpo}"
ARGS=(--algo "$ALGO")
[ -n "${MODEL_PATH:-}" ] && ARGS+=(--model "$MODEL_PATH")
[ -n "${TRAIN_DATA:-}" ] && ARGS+=(--train-data "$TRAIN_DATA")
[ -n "${VAL_DATA:-}" ] && ARGS+=(--val-data "$VAL_DATA")
[ -n "${OUTPUT_DIR:-}" ] && ARGS+=(--root-dir "$OUTPUT_DIR")
[ -n "${TOTAL_TRAINING_STEPS:-}" ] && ARGS+=(--steps "$TOTAL_TRAINING_STEPS")
# Run from the caller's folder, so relative paths (TRAIN_DATA, OUTPUT_DIR, --model) mean what they say there;
# this checkout's e2c comes first on the path.
e2c_checkout_first
exec "$PY" -m e2c.rl.launch "${ARGS[@]}" "$@"
