# Sourced (not run) by the scripts in this folder: where the checkout is and which Python runs it.
#
#   ROOT   the checkout (the folder above scripts/)
#   VENV   the virtual environment: $E2C_VENV, else $ROOT/.venv
#   PY     $VENV/bin/python when it exists, else the python on PATH (an environment the caller activated)
#
#   e2c_setup_venv [--test] [--vllm]   create or update $VENV first (scripts/setup_env.sh, its messages
#                                      included); PY is then the environment's python
#   e2c_checkout_first                 put this checkout's e2c first on PYTHONPATH, for scripts that run
#                                      from the caller's folder (so relative paths mean what they say there)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${E2C_VENV:-$ROOT/.venv}"
PY="python"
if [ -x "$VENV/bin/python" ]; then PY="$VENV/bin/python"; fi

e2c_setup_venv() {
  bash "$ROOT/scripts/setup_env.sh" "$@"
  PY="$VENV/bin/python"
}

e2c_checkout_first() {
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
}
