#!/usr/bin/env bash
# Install what the tests need (into .venv) and run lint, format check and the default test suite: the unit
# and integration tiers (tests/conftest.py, "tiers"); the end-to-end tier is `-m slow`.
#
#   bash scripts/test.sh            # ruff + pytest -m "not slow and not gpu"   (~15 min on 2 cores; setup apart)
#   bash scripts/test.sh -m slow    # extra pytest arguments replace the default marker selection
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
e2c_setup_venv --test --vllm
echo "[test] ruff check / ruff format --check"
"$PY" -m ruff check .
"$PY" -m ruff format --check .
if [ "$#" -gt 0 ]; then ARGS=("$@"); else ARGS=(-m "not slow and not gpu" --durations=25); fi
echo "[test] pytest ${ARGS[*]}"
exec "$PY" -m pytest "${ARGS[@]}"
