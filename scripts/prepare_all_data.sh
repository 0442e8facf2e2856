#!/usr/bin/env bash
# Prepare every dataset the toolkit trains and evaluates on; outputs land in data/processed/{sft,rl,eval,ef_sft}/.
#
#   bash scripts/prepare_all_data.sh [--mirror] [--skip-rl] [--skip-download] [--synthetic N] [more: --help]
#
# With the hub reachable it downloads TingheOliver/Explore-Execute-Chain-Datasets (resumable, verified) and
# converts it; offline, --skip-download builds the synthetic data (2,000 problems in a few seconds), the
# benchmarks found in --data-dir / $E2C_DATA_DIR, and EF-SFT data from the synthetic SFT set.
# Raw files already on disk are found in our layout (data/raw/e2c-sft.parquet, data/raw/ef-rl*.parquet,
# data/raw/evaluation/) and in the one the release's own download scripts make (data/raw/sft/,
# data/raw/rl/ with e2c-rl*.parquet, data/evaluation/<name>.parquet), with no extra flags.
# The first run converts the embedded SmolLM2 tokenizer used for EF-SFT token counts (about a minute).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
e2c_setup_venv >/dev/null
exec "$PY" -m e2c.data.prepare "$@"
