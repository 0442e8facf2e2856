#!/usr/bin/env bash
# Download the paper's data into data/raw (resumable: re-run the same command after an interruption;
# every file is checked against the hub's size and hash before it is kept).
#
#   bash scripts/download_datasets.sh --dataset eval|sft|rl|all [--mirror] [--endpoint URL] [--out DIR]
#
# Then `bash scripts/prepare_all_data.sh --skip-download` converts what was downloaded.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
e2c_setup_venv >/dev/null
exec "$PY" -m e2c.data.download "$@"
