#!/usr/bin/env bash
# EF-SFT (exploration-focused SFT): adapt a model to a new domain by training only on its explorations, plus
# a small share of full chains that keeps execution intact (python -m e2c.sft.run --mode ef-sft).
#
#   bash scripts/ef-sft.sh                                     # GPUs: Qwen/Qwen3-8B on data/processed/ef_sft/
#   MODEL_PATH=models/checkpoints/sft/final bash scripts/ef-sft.sh       # continue from an E2C SFT model
#   MODEL_PATH=embedded TOTAL_TRAINING_STEPS=6 bash scripts/ef-sft.sh    # CPU, no hub: ~15 s/step (SmolLM2-135M)
#
# Rows with loss_scope=exploration train on the assistant tokens up to and including </EXPLORATION> (not the
# end-of-turn token: the model must not learn to stop after its plan); rows with loss_scope=full train the
# whole chain. Build the data with `bash scripts/prepare_all_data.sh` (its EF-SFT step prints the token share).
#
# Environment (all optional):
#   MODEL_PATH            base model: HF id, folder, 'embedded' or 'tiny' (default: Qwen/Qwen3-8B with GPUs,
#                         embedded on CPU); a model without the E2C tags gets a tagged copy in models/base/
#   TRAIN_DATA            EF-SFT parquet(s), comma-separated (default: data/processed/ef_sft/ef_sft.parquet)
#   VAL_DATA              validation parquet(s) or 'none' (default: none)
#   OUTPUT_DIR            run folder (default: models/checkpoints/ef_sft): verl/, final/, sft_data_stats.json
#   TOTAL_TRAINING_STEPS  optimizer steps (default: 3 epochs with GPUs, 20 on CPU)
#   CUDA_VISIBLE_DEVICES  GPUs to use; GPUs are counted from it or torch; none found -> CPU processes (N_GPUS, 1)
#   N_GPUS                GPUs per node, at most the visible ones; with no GPU, CPU ranks (FSDP over gloo)
#   NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT   multi-node torchrun rendezvous (default: 1 node)
# Extra arguments are Hydra overrides for configs/e2c_sft.yaml or flags of python -m e2c.sft.run (--help);
# the mode is this script's: --mode ef-sft is accepted, any other --mode is refused (plain SFT: e2c_sft.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_launch_checks.sh"
e2c_fixed_flag scripts/ef-sft.sh --mode --mode ef-sft "for E2C SFT on full chains run scripts/e2c_sft.sh" "$@"
E2C_SFT_MODE=ef-sft exec bash "$(dirname "${BASH_SOURCE[0]}")/e2c_sft.sh" "$@"
