#!/usr/bin/env bash
# The paper's whole pipeline on GPUs, one step after another, every knob a variable with its default:
#
#   data -> SFT -> [pass-rate filter] -> GRPO stage 1 -> GRPO stage 2 -> evaluation -> test-time scaling
#
#   bash scripts/gpu_recipe.sh                      # everything, from the data on
#   FROM=rl1 bash scripts/gpu_recipe.sh             # start at GRPO stage 1 (data and SFT already done)
#   DRY_RUN=1 bash scripts/gpu_recipe.sh            # check the configs at this size, print each step's
#                                                   # command and time estimate, run nothing
#   E2C_CHECK_ONLY=1 bash scripts/gpu_recipe.sh     # check the knobs and the sizes, print nothing more
#   DRY_RUN=1 N_GPUS=8 NNODES=2 bash scripts/gpu_recipe.sh   # the same check for 2 nodes of 8 GPUs
#   BASE_MODEL=Qwen/Qwen3-4B NNODES=2 bash scripts/gpu_recipe.sh
#   PASS_RATE_FILTER=1 bash scripts/gpu_recipe.sh   # RL on the prompts the SFT model solves sometimes
#
# It runs in the environment named by E2C_VENV (default .venv), or the python on PATH when that has none:
# build it from requirements-gpu.txt (scripts/setup_env.sh installs the CPU stack). Every step is one of the
# toolkit's entry points (python -m e2c.data.prepare, e2c.sft.run, e2c.rl.passrate, e2c.rl.launch,
# e2c.eval.run, and e2c.tts; each has --help), run from the checkout, so the relative paths below are
# the checkout's.
# Each step resumes when re-run (verl checkpoints, per-problem result files), so after a failure re-run
# the same command with FROM set to the failed step.
#
# Before anything runs (also with DRY_RUN=1), python -m e2c.recipe_check composes each training step's Hydra
# config at this size (NNODES x N_GPUS), runs verl's own config checks and the batch arithmetic verl asserts
# only inside its workers, and prints per step "ok" and a time ESTIMATE: a FLOPs model (6N FLOPs per trained
# token, 2N per generated or scored token, assumed MFU 0.35 training / 0.05 decoding, 989 TFLOP/s per GPU,
# responses at half their maximum; the formula is in e2c/recipe_check.py's docstring), not a measurement:
# none of these steps has been timed at the paper's scale here. A size that cannot run stops there, with one
# error line naming the setting, before anything is queued.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
e2c_checkout_first

# ---------------------------------------------------------------------------------------------- knobs
DRY_RUN="${DRY_RUN:-0}"                 # 1 (true, yes): print the commands instead of running them
FROM="${FROM:-data}"                    # first step to run: data, sft, filter, rl1, rl2, eval, tts
BASE_MODEL="${BASE_MODEL:-Qwen/Qwen3-8B}"   # the paper's base model (the release also has a 4B)
NNODES="${NNODES:-1}"                   # nodes
# GPUs per node: the check's size and what every step uses (at most the visible ones); empty: all visible
# GPUs (CUDA_VISIBLE_DEVICES picks), and 8 for the check of a dry run
N_GPUS="${N_GPUS:-}"
SEED="${SEED:-0}"                       # data splits and synthetic data
# data: the paper's release (TingheOliver/Explore-Execute-Chain-Datasets) -> data/processed/{sft,rl,eval}
DATA_MIRROR="${DATA_MIRROR:-0}"         # 1: download from hf-mirror.com
SYNTHETIC="${SYNTHETIC:-2000}"          # synthetic problems generated next to the paper's data
# SFT: lr 2e-5 cosine, batch 160, FSDP2 (configs/e2c_sft.yaml); 3 epochs unless SFT_STEPS is set
SFT_DIR="${SFT_DIR:-models/checkpoints/sft}"   # its final/ is the HF model RL starts from
SFT_STEPS="${SFT_STEPS:-}"              # optimizer steps (empty: all epochs)
# GRPO (configs/e2c_grpo.yaml): batch 256, mini-batch 32, lr 1e-6, prompt 712 / response 8,192 tokens.
# Stage 1: n=32, T=1.3, exploration coefficient 1.0, 1 epoch. Stage 2: n=8, T=1.0, coefficient 2.0,
# plan-adherence reward, 2 epochs, from stage 1's latest checkpoint.
RL_ALGO="${RL_ALGO:-grpo}"              # grpo (the paper) or dapo
# The paper's folders (scripts/e2c_rl.sh's defaults): rl/stage1-warmup and rl/stage2-main (DAPO: under rl/dapo).
RL_ROOT="models/checkpoints/rl$([ "$RL_ALGO" = grpo ] || echo "/$RL_ALGO")"
RL1_DIR="${RL1_DIR:-$RL_ROOT/stage1-warmup}"
RL2_DIR="${RL2_DIR:-$RL_ROOT/stage2-main}"
RL1_STEPS="${RL1_STEPS:-}"              # stop stage 1 after N steps (empty: the config's epochs)
RL2_STEPS="${RL2_STEPS:-}"              # stop stage 2 after N steps (empty: the config's epochs)
RL_TRAIN_DATA="${RL_TRAIN_DATA:-data/processed/rl/e2c_rl_train.parquet}"
RL_VAL_DATA="${RL_VAL_DATA:-data/processed/rl/e2c_rl_val.parquet}"
# pass-rate filter (opt-in; python -m e2c.rl.passrate): k samples per RL training prompt from the SFT model
# on vLLM, at the rollout's temperature (1.0) and the RL configs' response length, graded by the RL reward's
# grader; both GRPO stages then train on the prompts whose pass rate lies in the band (the validation set
# is not filtered). Zero-variance groups (all right or all wrong) then cost no rollouts; with RL_ALGO=dapo
# its dynamic sampling still drops the ones the policy makes during training.
PASS_RATE_FILTER="${PASS_RATE_FILTER:-0}"   # 1: run the filter before stage 1 and train on what it keeps
PASS_RATE_K="${PASS_RATE_K:-8}"             # samples per prompt
PASS_RATE_BAND="${PASS_RATE_BAND:-learnable}"   # 0 < p < 1; hard, easy, not-solved, solvable, or (LO,HI]
PASS_RATE_MAX_TOKENS="${PASS_RATE_MAX_TOKENS:-}"   # empty: the RL configs' data.max_response_length (8,192)
PASS_RATE_OUTPUT="${PASS_RATE_OUTPUT:-${RL_TRAIN_DATA%.parquet}.filtered.parquet}"   # report etc. beside it
# evaluation: the paper's pass@1 avg@8 at temperature 1.0; 8,192 new tokens (math) / 1,500 (medical)
EVAL_DATASETS="${EVAL_DATASETS:-all}"   # all: the 8 math sets; med: the medical ones; or names, comma-separated
EVAL_SAMPLES="${EVAL_SAMPLES:-8}"
EVAL_TEMPERATURE="${EVAL_TEMPERATURE:-1.0}"
EVAL_MAX_TOKENS="${EVAL_MAX_TOKENS:-}"  # empty: each set's own budget (8,192 math, 1,500 medical)
EVAL_DIR="${EVAL_DIR:-evaluation/e2c-eval/e2c-${RL_ALGO}-stage2}"
# test-time scaling (tts/config/tts.yaml): AIME 2024, K/N 1-32, T=0.9 / top_p 0.95, explorations <= 512
# tokens, executions <= 16,384 (greedy); the paper: E2C-ReAct 53.3% at 12.4k tokens per problem against
# self-consistency's 50.0% at 86.2k
TTS_DATASET="${TTS_DATASET:-aime24}"
TTS_BUDGETS="${TTS_BUDGETS:-1 4 8 16 32}"
TTS_METHODS="${TTS_METHODS-self_consistency e2c_sc e2c_rp}"   # set but empty: the config's ten
TTS_EXPLORE_BUDGET="${TTS_EXPLORE_BUDGET:-512}"
TTS_EXECUTE_BUDGET="${TTS_EXECUTE_BUDGET:-16384}"
TTS_DIR="${TTS_DIR:-tts/outputs}"

# ------------------------------------------------------------------------------------- check the knobs
# Every knob is checked here, before anything runs and the same way with DRY_RUN=1: a dry run never prints
# commands for values the real run would refuse hours later. One error line, exit 2.
knob_error() { echo "error: $1" >&2; exit 2; }
# knob_bool NAME: NAME becomes 1 or 0 from the usual spellings (1/true/yes/on, 0/false/no/off, any case);
# anything else is refused, so that DRY_RUN=true is a dry run and never the real thing.
knob_bool() {
  local v="${!1}"
  case "${v,,}" in
    1|true|yes|on) printf -v "$1" 1 ;;
    0|false|no|off) printf -v "$1" 0 ;;
    *) knob_error "$1 must be 1/true/yes or 0/false/no, got ${v@Q}" ;;
  esac
}
# knob_whole NAME LOW [optional]: NAME is a whole number >= LOW (or empty, when optional).
knob_whole() {
  local v="${!1}"
  if [ -z "$v" ] && [ "${3:-}" = optional ]; then return 0; fi
  if ! [[ "$v" =~ ^[0-9]{1,9}$ ]] || [ "$((10#$v))" -lt "$2" ]; then
    knob_error "$1 must be a whole number >= $2${3:+ (or empty)}, got ${v@Q}"
  fi
}
STEPS=(data sft filter rl1 rl2 eval tts)
case " ${STEPS[*]} " in
  *" $FROM "*) ;;
  *) knob_error "FROM must be one of: ${STEPS[*]}; got ${FROM@Q}" ;;
esac
knob_bool DRY_RUN
knob_bool DATA_MIRROR
knob_bool PASS_RATE_FILTER
case "$RL_ALGO" in
  grpo|dapo) ;;
  *) knob_error "RL_ALGO must be grpo or dapo, got ${RL_ALGO@Q}" ;;
esac
knob_whole NNODES 1
knob_whole N_GPUS 1 optional
knob_whole SEED 0
knob_whole SYNTHETIC 0
knob_whole SFT_STEPS 1 optional
knob_whole RL1_STEPS 1 optional
knob_whole RL2_STEPS 1 optional
knob_whole PASS_RATE_K 2
knob_whole PASS_RATE_MAX_TOKENS 1 optional
knob_whole EVAL_SAMPLES 1
knob_whole EVAL_MAX_TOKENS 1 optional
if ! [[ "$EVAL_TEMPERATURE" =~ ^([0-9]+(\.[0-9]*)?|\.[0-9]+)$ ]]; then
  knob_error "EVAL_TEMPERATURE must be a number >= 0, got ${EVAL_TEMPERATURE@Q}"
fi
knob_whole TTS_EXPLORE_BUDGET 1
knob_whole TTS_EXECUTE_BUDGET 1
read -r -a budgets <<<"$TTS_BUDGETS"
bad_budget="$([ "${#budgets[@]}" -gt 0 ] || echo none)"
for b in "${budgets[@]}"; do
  if ! [[ "$b" =~ ^[0-9]{1,9}$ ]] || [ "$((10#$b))" -lt 1 ]; then bad_budget="$b"; fi
done
if [ -n "$bad_budget" ]; then
  knob_error "TTS_BUDGETS must be whole numbers >= 1 separated by spaces (e.g. '1 4 8'), got ${TTS_BUDGETS@Q}"
fi
if [ "$PASS_RATE_FILTER" = 1 ]; then  # the filter runs after SFT: its band is checked now, not then
  "$PY" -c 'import sys
from e2c.data.bands import parse_band
from e2c.core.errors import UserError, fail
try:
    parse_band(sys.argv[1], "PASS_RATE_BAND")
except UserError as e:
    fail(str(e))' "$PASS_RATE_BAND"
fi

started=0
# step NAME: whether NAME runs (it is FROM or comes after it).
step() {
  if [ "$1" = "$FROM" ]; then started=1; fi
  if [ "$started" = 1 ]; then echo "[recipe] step $1"; fi
  [ "$started" = 1 ]
}
# run CMD...: the command, printed first (shell-quoted; with DRY_RUN=1 only printed).
run() {
  printf '+'; printf ' %q' "$@"; printf '\n'
  if [ "$DRY_RUN" != 1 ]; then "$@"; fi
}
# The HF folder of stage 2's latest checkpoint (verl saves one with every checkpoint).
rl_model() {
  if [ "$DRY_RUN" = 1 ]; then echo "$RL2_DIR/global_step_LATEST/actor/huggingface"; return; fi
  # latest_hf_checkpoint also merges a LoRA run's adapter into that folder.
  "$PY" -c 'import sys; from e2c.core.errors import UserError, fail; from e2c.rl.launch import latest_hf_checkpoint
from pathlib import Path
try: print(latest_hf_checkpoint(Path(sys.argv[1])))
except UserError as e: fail(str(e))' "$RL2_DIR"
}

# ------------------------------------------------------------------------------- check and estimate
# Every training step's config at NNODES x N_GPUS, verl's checks and its run-time batch arithmetic, and each
# step's time estimate (python -m e2c.recipe_check --help); stops here when a setting cannot run at this size.
# A real run checks the GPUs the steps will use (auto: N_GPUS, at most the visible ones; none: no check).
check=(--gpus "$([ "$DRY_RUN" = 1 ] && echo "${N_GPUS:-8}" || echo auto)" --nnodes "$NNODES" --algo "$RL_ALGO"
       --model "$BASE_MODEL" --from "$FROM" --rl-train-data "$RL_TRAIN_DATA" --eval-datasets "$EVAL_DATASETS"
       --eval-samples "$EVAL_SAMPLES")
[ -n "$SFT_STEPS" ] && check+=(--sft-steps "$SFT_STEPS")
[ -n "$RL1_STEPS" ] && check+=(--rl1-steps "$RL1_STEPS")
[ -n "$RL2_STEPS" ] && check+=(--rl2-steps "$RL2_STEPS")
[ -n "$EVAL_MAX_TOKENS" ] && check+=(--eval-max-tokens "$EVAL_MAX_TOKENS")
[ "$PASS_RATE_FILTER" = 1 ] && check+=(--filter-k "$PASS_RATE_K")
# (E2C_CHECK_ONLY is this script's: the check runs in full either way.) Its progress lines go to stdout with
# the commands; stderr holds only the error line of a size that cannot run.
E2C_CHECK_ONLY= "$PY" -m e2c.recipe_check "${check[@]}"
# E2C_CHECK_ONLY=1: every knob and the sizes are checked; stop before the first step (as every entry point)
case "${E2C_CHECK_ONLY:-}" in
  1|[Tt]rue|TRUE|[Yy]es|YES|[Oo]n|ON) echo "checks passed" >&2; exit 0 ;;
esac

# 1. data: download (resumable, verified) and convert (time: unknown, bound by the download)
if step data; then
  args=(--synthetic "$SYNTHETIC" --seed "$SEED")
  [ "$DATA_MIRROR" = 1 ] && args+=(--mirror)
  run "$PY" -m e2c.data.prepare "${args[@]}"
fi

# 2. SFT on full Explore-Execute chains (time: the check's estimate)
if step sft; then
  args=(--mode sft --model "$BASE_MODEL" --output-dir "$SFT_DIR" --nnodes "$NNODES")
  [ -n "$SFT_STEPS" ] && args+=(--steps "$SFT_STEPS")
  run "$PY" -m e2c.sft.run "${args[@]}"
fi

# 3. (opt-in) pass-rate filter of the RL prompts with the SFT model on vLLM (time: the check's estimate; one
# k-sample pass over the prompts, resumed from its samples file when re-run)
if [ "$PASS_RATE_FILTER" = 1 ]; then
  if step filter; then
    args=(--model "$SFT_DIR/final" --input "$RL_TRAIN_DATA" --output "$PASS_RATE_OUTPUT" --k "$PASS_RATE_K"
          --band "$PASS_RATE_BAND" --backend vllm --seed "$SEED")
    [ -n "$PASS_RATE_MAX_TOKENS" ] && args+=(--max-tokens "$PASS_RATE_MAX_TOKENS")
    run "$PY" -m e2c.rl.passrate "${args[@]}"
  fi
  RL_TRAIN_DATA="$PASS_RATE_OUTPUT"  # both stages train on the kept prompts
elif [ "$FROM" = filter ]; then
  started=1  # the filter is off: FROM=filter starts at stage 1
fi

# 4. GRPO stage 1, the warm-up (time: the check's estimate)
if step rl1; then
  args=(--algo "$RL_ALGO" --stage 1 --model "$SFT_DIR/final" --train-data "$RL_TRAIN_DATA"
        --val-data "$RL_VAL_DATA" --output-dir "$RL1_DIR" --nnodes "$NNODES")
  [ -n "$RL1_STEPS" ] && args+=(--steps "$RL1_STEPS")
  run "$PY" -m e2c.rl.launch "${args[@]}"
fi

# 5. GRPO stage 2, exploration advantages weighted (time: the check's estimate)
if step rl2; then
  args=(--algo "$RL_ALGO" --stage 2 --stage1-dir "$RL1_DIR" --train-data "$RL_TRAIN_DATA"
        --val-data "$RL_VAL_DATA" --output-dir "$RL2_DIR" --nnodes "$NNODES")
  [ -n "$RL2_STEPS" ] && args+=(--steps "$RL2_STEPS")
  run "$PY" -m e2c.rl.launch "${args[@]}"
fi

# 6. evaluation of the stage-2 model (time: the check's estimate)
if step eval; then
  model="$(rl_model)"
  args=(--model "$model" --dataset "$EVAL_DATASETS" --sample "$EVAL_SAMPLES" --temperature "$EVAL_TEMPERATURE"
        --seed "$SEED" --output-dir "$EVAL_DIR")
  [ -n "$EVAL_MAX_TOKENS" ] && args+=(--max-tokens "$EVAL_MAX_TOKENS")
  run "$PY" -m e2c.eval.run "${args[@]}"
fi

# 7. test-time scaling with the stage-2 model (time: unknown, see the check's line for why; the run prints
# an ETA per problem)
if step tts; then
  model="$(rl_model)"
  args=(--model "$model" --dataset "$TTS_DATASET" --budgets "${budgets[@]}" --output-dir "$TTS_DIR"
        --set "explore_budget=$TTS_EXPLORE_BUDGET" --set "execute_budget=$TTS_EXECUTE_BUDGET")
  if [ -n "$TTS_METHODS" ]; then
    read -r -a methods <<<"$TTS_METHODS"
    args+=(--methods "${methods[@]}")
  fi
  run "$PY" -m e2c.tts "${args[@]}"
fi
