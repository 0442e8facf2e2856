#!/usr/bin/env bash
# Prepare every dataset the toolkit trains and evaluates on; outputs land in data/processed/{sft,rl,eval,ef_sft}/.
#
#   bash scripts/prepare_all_data.sh [--mirror] [--skip-rl] [--skip-download] [--synthetic N] [more: --help]
#   bash scripts/prepare_all_data.sh --skip-download --pass-rate-filter models/checkpoints/sft/final
#
# With the hub reachable it downloads TingheOliver/Explore-Execute-Chain-Datasets (resumable, verified) and
# converts it; offline, --skip-download builds the synthetic data (2,000 problems in a few seconds), the
# benchmarks found in --data-dir / $E2C_DATA_DIR, and EF-SFT data from the synthetic SFT set.
# Raw files already on disk are found in our layout (data/raw/e2c-sft.parquet, data/raw/ef-rl*.parquet,
# data/raw/evaluation/) and in the one the release's own download scripts make (data/raw/sft/,
# data/raw/rl/ with e2c-rl*.parquet, data/evaluation/<name>.parquet), with no extra flags.
# The first run converts the embedded SmolLM2 tokenizer used for EF-SFT token counts (about a minute).
#
# Opt-in, learnable RL prompts (python -m e2c.rl.passrate --help): --pass-rate-filter MODEL samples k
# answers per prompt of each RL training file this run wrote (rl/e2c_rl_train.parquet, rl/synthetic_rl.parquet)
# from MODEL (the model RL starts from) and writes the prompts solved sometimes, but not always, to
# rl/<name>.filtered.parquet, with rl/<name>.filtered.passrate.{json,png} (report, histogram) and .jsonl
# (samples; a re-run resumes). Its knobs, each with the filter's default when not given:
#   --pass-rate-k K            samples per prompt (8)
#   --pass-rate-band BAND      learnable (0 < p < 1), hard, easy, not-solved, solvable, all, or an interval
#   --pass-rate-max-tokens N   new tokens per sample (the RL configs' data.max_response_length, 8192)
#   --pass-rate-backend B      auto (vLLM when installed), vllm or hf
# Time: one k-sample generation pass over the RL prompts (GPUs: vLLM; the CPU is slow beyond small models).
# Exit status 1 when a requested step (the filter included) failed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"

# The pass-rate flags are this script's; every other argument goes to e2c.data.prepare as given.
PR_MODEL=""
PR_ARGS=()
PREP_ARGS=()
OUT_DIR=""  # e2c.data.prepare's --out, when given
HELP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --pass-rate-filter|--pass-rate-k|--pass-rate-band|--pass-rate-max-tokens|--pass-rate-backend)
      if [ $# -lt 2 ]; then echo "error: $1 needs a value (see --help)" >&2; exit 2; fi
      flag="$1" value="$2"; shift 2 ;;
    --pass-rate-*=*)
      flag="${1%%=*}" value="${1#*=}"; shift ;;
    *)
      case "$1" in
        -h|--help) HELP=1 ;;
        --out=*) OUT_DIR="${1#--out=}" ;;
        --out) [ $# -ge 2 ] && OUT_DIR="$2" ;;
      esac
      PREP_ARGS+=("$1"); shift; continue ;;
  esac
  case "$flag" in
    --pass-rate-filter) PR_MODEL="$value" ;;
    --pass-rate-k) PR_ARGS+=(--k "$value") ;;
    --pass-rate-band) PR_ARGS+=(--band "$value") ;;
    --pass-rate-max-tokens) PR_ARGS+=(--max-tokens "$value") ;;
    --pass-rate-backend) PR_ARGS+=(--backend "$value") ;;
    *) echo "error: unknown flag $flag; valid: --pass-rate-filter, --pass-rate-k, --pass-rate-band," \
         "--pass-rate-max-tokens, --pass-rate-backend (see --help)" >&2; exit 2 ;;
  esac
done

e2c_setup_venv >/dev/null
if [ "$HELP" = 1 ]; then
  "$PY" -m e2c.data.prepare --help
  echo
  echo "learnable RL prompts (opt-in; python -m e2c.rl.passrate --help):"
  echo "  --pass-rate-filter MODEL   keep the prompts of each RL training file written that MODEL solves"
  echo "                             sometimes: rl/<name>.filtered.parquet (default: off)"
  echo "  --pass-rate-k K            samples per prompt (default: 8)"
  echo "  --pass-rate-band BAND      pass rates kept (default: learnable, 0 < p < 1)"
  echo "  --pass-rate-max-tokens N   new tokens per sample (default: the RL configs' response length)"
  echo "  --pass-rate-backend B      auto, vllm or hf (default: auto)"
  exit 0
fi
if [ -z "$PR_MODEL" ]; then
  if [ ${#PR_ARGS[@]} -gt 0 ]; then
    echo "error: ${PR_ARGS[0]/--/--pass-rate-} needs --pass-rate-filter MODEL" >&2; exit 2
  fi
  # The default: exactly the prepare step, as before the filter existed.
  exec "$PY" -m e2c.data.prepare "${PREP_ARGS[@]}"
fi

# Refuse bad filter settings now, not after the whole preparation: the model too (a folder is checked for
# config, weights and tokenizer; an HF id is fetched when the filter runs).
"$PY" -c 'import sys
from e2c.commandline.argtypes import MODEL
from e2c.core.errors import UserError, fail
from e2c.data.bands import parse_band
from e2c.generation import ALIASES, BACKENDS
args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
for flag, least in (("--k", 2), ("--max-tokens", 1)):
    v = args.get(flag, str(least))
    if not v.isdigit() or int(v) < least:
        fail(f"--pass-rate-{flag[2:]} must be an integer >= {least}, got {v!r}")
backend, backends = args.get("--backend", "auto"), ", ".join((*BACKENDS, *ALIASES))
if backend not in (*BACKENDS, *ALIASES):
    fail(f"--pass-rate-backend must be one of {backends}, got {backend!r}")
try:
    parse_band(args.get("--band", "learnable"), "--pass-rate-band")
except UserError as e:
    fail(str(e))
try:
    MODEL.parse(sys.argv[1])
except UserError as e:
    fail(f"--pass-rate-filter {e}")' "$PR_MODEL" "${PR_ARGS[@]}"
if [[ "${E2C_CHECK_ONLY:-}" =~ ^(1|[Tt]rue|TRUE|[Yy]es|YES|[Oo]n|ON)$ ]]; then
  # check-only: the filter's settings above, prepare's own checks next (it stops there, "checks passed")
  exec "$PY" -m e2c.data.prepare "${PREP_ARGS[@]}"
fi

# prepare's --out default: data/processed of the project (e2c.core.paths), as e2c.data.prepare resolves it
if [ -z "$OUT_DIR" ]; then
  OUT_DIR="$("$PY" -c 'from e2c.core.paths import data_dir; print(data_dir() / "processed")')"
fi
started="$(date +%s)"
status=0
"$PY" -m e2c.data.prepare "${PREP_ARGS[@]}" || status=$?
if [ "$status" -gt 1 ]; then exit "$status"; fi  # refused before any work: nothing to filter
filtered=0
for name in e2c_rl_train synthetic_rl; do
  input="$OUT_DIR/rl/$name.parquet"
  # Only files this run wrote: an older one may be from other settings, and is filtered when re-made.
  if [ ! -f "$input" ] || [ "$(stat -c %Y "$input")" -lt "$started" ]; then continue; fi
  filtered=1
  echo "pass-rate filter: $input with $PR_MODEL"  # progress: stdout (stderr is for error lines)
  if ! "$PY" -m e2c.rl.passrate --model "$PR_MODEL" --input "$input" "${PR_ARGS[@]}"; then
    echo "FAILED pass-rate filter $input" >&2
    status=1
  fi
done
if [ "$filtered" = 0 ]; then
  echo "FAILED pass-rate filter: this run wrote no RL training file in $OUT_DIR/rl" >&2
  status=1
fi
exit "$status"
