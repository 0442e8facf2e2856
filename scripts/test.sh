#!/usr/bin/env bash
# Install what the tests need (into .venv) and run lint, format check and the default CPU test suite.
#
#   bash scripts/test.sh            # ruff + pytest -m "not slow and not gpu"   (~5 min incl. first setup)
#   bash scripts/test.sh -m slow    # extra pytest arguments replace the default marker selection
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup_env.sh --test --vllm
VENV="${E2C_VENV:-$ROOT/.venv}"
echo "[test] ruff check / ruff format --check"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
if [ "$#" -gt 0 ]; then ARGS=("$@"); else ARGS=(-m "not slow and not gpu"); fi
echo "[test] pytest ${ARGS[*]}"
exec "$VENV/bin/python" -m pytest "${ARGS[@]}"
