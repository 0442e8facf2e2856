# Sourced (not run) by the scripts in this folder: where the checkout is and which Python runs it.
#
#   ROOT   the checkout (the folder above scripts/)
#   VENV   the virtual environment: $E2C_VENV, else $ROOT/.venv
#   PY     the Python that runs the toolkit, the first of:
#            1. the active environment's python (VIRTUAL_ENV / CONDA_PREFIX), when it holds the GPU stack
#               (vLLM for CUDA or a CUDA torch): a GPU user's own environment is never passed over;
#            2. $VENV/bin/python when it exists;
#            3. the python on PATH (an environment the caller activated).
#   E2C_GPU_ENV  1 when PY holds the GPU stack (then no script installs anything into it)
#
#   e2c_setup_venv [--test] [--vllm]   create or update $VENV first (scripts/setup_env.sh, its messages
#                                      included); PY is then the environment's python. With the GPU stack
#                                      in PY it installs nothing (the CPU set-up would replace its torch).
#   e2c_checkout_first                 put this checkout's e2c first on PYTHONPATH, for scripts that run
#                                      from the caller's folder (so relative paths mean what they say there)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${E2C_VENV:-$ROOT/.venv}"

# e2c_gpu_stack PYTHON: exit 0 when PYTHON's environment has vLLM's CUDA build or a CUDA torch (read from
# package metadata: nothing is imported, so it costs one interpreter start).
e2c_gpu_stack() {
  "$1" - <<'EOF' 2>/dev/null
import sys
from importlib.metadata import distributions
names = {(d.metadata["Name"] or "").lower() for d in distributions()}
sys.exit(0 if "vllm" in names or any(n.startswith("nvidia-cuda-runtime") for n in names) else 1)
EOF
}

E2C_GPU_ENV=0
PY="python"
if [ -x "$VENV/bin/python" ]; then PY="$VENV/bin/python"; fi
for _active in "${VIRTUAL_ENV:-}" "${CONDA_PREFIX:-}"; do
  if [ -n "$_active" ] && [ -x "$_active/bin/python" ] && [ "$_active/bin/python" != "$VENV/bin/python" ] \
     && e2c_gpu_stack "$_active/bin/python"; then
    PY="$_active/bin/python"
    break
  fi
done
unset _active
if e2c_gpu_stack "$PY"; then E2C_GPU_ENV=1; fi

e2c_setup_venv() {
  if [ "$E2C_GPU_ENV" = 1 ]; then
    echo "[setup] $PY holds the GPU stack: using it as it is, nothing installed" >&2
    return 0
  fi
  bash "$ROOT/scripts/setup_env.sh" "$@"
  PY="$VENV/bin/python"
}

e2c_checkout_first() {
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
}
