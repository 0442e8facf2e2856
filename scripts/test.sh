#!/usr/bin/env bash
# Install what the tests need (into .venv) and run lint, format check and the default test suite: the unit
# and integration tiers (tests/conftest.py, "tiers"); the end-to-end tier is `-m slow`.
#
#   bash scripts/test.sh            # ruff + pytest -m "not slow and not gpu" on 2 workers (pytest-xdist)
#   bash scripts/test.sh -m slow    # extra pytest arguments replace the default selection (and run on one
#                                   # process unless they say -n)
# Two workers, whole files each (--dist loadfile: a module's shared runs stay in one process): on 2 cores a test
# that waits (a process starting, a wall-clock kill) leaves a core the other worker uses. Files go out in
# collection order (--no-loadscope-reorder: xdist would hand out the files with most tests first), which
# tests/conftest.py begins with the longest end-to-end runs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$ROOT"
e2c_setup_venv --test --vllm
echo "[test] ruff check / ruff format --check"
"$PY" -m ruff check .
"$PY" -m ruff format --check .
if [ "$#" -gt 0 ]; then ARGS=("$@"); else ARGS=(-n 2 --dist loadfile --no-loadscope-reorder -m "not slow and not gpu" --durations=25); fi
echo "[test] pytest ${ARGS[*]}"
exec "$PY" -m pytest "${ARGS[@]}"
