#!/usr/bin/env bash
# E2C SFT: train a base model on full Explore-Execute chains with verl's SFT trainer (python -m e2c.sft.run).
#
#   bash scripts/e2c_sft.sh                                    # GPUs: Qwen/Qwen3-8B on the processed SFT data
#   MODEL_PATH=embedded TOTAL_TRAINING_STEPS=6 bash scripts/e2c_sft.sh   # CPU, no hub: ~25 s/step (SmolLM2-135M)
#   MODEL_PATH=tiny TOTAL_TRAINING_STEPS=3 bash scripts/e2c_sft.sh data.train_batch_size=4   # smoke test, ~40 s
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=node0 bash scripts/e2c_sft.sh   # on every node, NODE_RANK 0..NNODES-1
#
# Environment (all optional):
#   MODEL_PATH            base model: HF id, folder, 'embedded' or 'tiny' (default: Qwen/Qwen3-8B with GPUs,
#                         embedded on CPU); a model without the E2C tags gets a tagged copy in models/base/
#   TRAIN_DATA            training parquet(s), comma-separated (default: data/processed/sft/e2c_sft_train.parquet,
#                         else data/processed/sft/synthetic_sft.parquet)
#   VAL_DATA              validation parquet(s) or 'none' (default: data/processed/sft/e2c_sft_val.parquet if present)
#   OUTPUT_DIR            run folder (default: models/checkpoints/sft): verl/ checkpoints, final/ HF model,
#                         sft_data_stats.json, train.log
#   TOTAL_TRAINING_STEPS  optimizer steps (default: 3 epochs with GPUs, 20 on CPU)
#   CUDA_VISIBLE_DEVICES  GPUs to use; GPUs are counted from it or torch; none found -> CPU processes (N_GPUS, 1)
#   N_GPUS                GPUs per node (torchrun processes), at most the visible ones (default: all visible);
#                         with no GPU, CPU ranks: N_GPUS=4 is a 4-rank FSDP run on gloo, sharded over 4 ranks
#   NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT   multi-node torchrun rendezvous (default: 1 node)
# Extra arguments are Hydra overrides for configs/e2c_sft.yaml (e.g. optim.lr=1e-5 data.max_length=16384)
# or flags of python -m e2c.sft.run (--help). The result, models/checkpoints/sft/final, loads with
# transformers, e2c.core.models.resolve_model, scripts/eval.sh --model and the RL scripts.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
# Whole numbers, named here: past this point the error would name the flag, not the variable.
source "$(dirname "${BASH_SOURCE[0]}")/_launch_checks.sh"
e2c_check_whole TOTAL_TRAINING_STEPS 1
e2c_check_whole NNODES 1 4096  # e2c.launch.devices.MAX_NODES
e2c_check_whole NODE_RANK 0
e2c_check_whole N_GPUS 0
# Run from the caller's folder, so relative paths (TRAIN_DATA, OUTPUT_DIR, --model) mean what they say there;
# this checkout's e2c comes first on the path.
e2c_checkout_first
args=(--mode "${E2C_SFT_MODE:-sft}" --nnodes "${NNODES:-1}" --node-rank "${NODE_RANK:-0}")
[ -n "${MODEL_PATH:-}" ] && args+=(--model "$MODEL_PATH")
[ -n "${TRAIN_DATA:-}" ] && args+=(--train-data "$TRAIN_DATA")
[ -n "${VAL_DATA:-}" ] && args+=(--val-data "$VAL_DATA")
[ -n "${OUTPUT_DIR:-}" ] && args+=(--output-dir "$OUTPUT_DIR")
[ -n "${TOTAL_TRAINING_STEPS:-}" ] && args+=(--steps "$TOTAL_TRAINING_STEPS")
exec "$PY" -m e2c.sft.run "${args[@]}" "$@"
