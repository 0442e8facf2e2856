#!/usr/bin/env bash
# E2C with DAPO on verl: clip 0.2/0.28, token-mean loss, dynamic sampling on accuracy (at most
# e2c.max_num_gen_batches=10 generation batches per step, then the step trains on what it has), overlong
# buffer penalty, no KL; the same two stages and exploration coefficient as scripts/e2c_rl.sh.
#
#   bash scripts/e2c_dapo.sh                         # both stages in order
#   bash scripts/e2c_dapo.sh --stage 1
#   bash scripts/e2c_dapo.sh --stage 2               # from DAPO stage 1's latest checkpoint
#
# Env and flags: as scripts/e2c_rl.sh (MODEL_PATH, TRAIN_DATA, VAL_DATA, OUTPUT_DIR, TOTAL_TRAINING_STEPS,
# N_GPUS, NNODES, CUDA_VISIBLE_DEVICES); OUTPUT_DIR defaults to models/checkpoints/rl/dapo, holding
# stage1-warmup/ and stage2-main/, each with final/.
# The algorithm is this script's: --algo dapo is accepted (harmless), any other --algo (--algo grpo, also
# spelled --algo=grpo or --alg grpo) is refused in one line before anything runs; GRPO is scripts/e2c_rl.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_launch_checks.sh"
e2c_fixed_flag scripts/e2c_dapo.sh --algo --a dapo \
  "for GRPO run scripts/e2c_rl.sh (the same flags and variables)" "$@"
E2C_ALGO=dapo exec bash "$(dirname "${BASH_SOURCE[0]}")/e2c_rl.sh" "$@"
