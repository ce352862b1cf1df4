#!/usr/bin/env bash
# Exercise every CUDA path of recstack end to end on one GPU, in at most 8 minutes:
# profile a zoo model on cuda (kernels under ops; inference, train, bf16), the GPU roofs of
# `recstack machine`, gather on device, the roofline against the GPU roofs, and `recstack compile`
# with inductor on cuda (regional dense/head: graphs, numerics, per-stage eager vs compiled), and the memory
# pass on the CUDA allocator (`recstack memory --measure --device cuda`: each stage's peak beside the prediction).
# Prints one `PASS|FAIL <path>: <figures>` line per path and exits 1 if any failed.
# Without a GPU (or with CUDA_VISIBLE_DEVICES empty or -1) it prints `no GPU: skipped` and exits 0.
#
# Runs from a fresh copy of the repository: it uses $RECSTACK_PYTHON, else .venv/bin/python, else
# python3, whichever imports torch, numpy, yaml, pydantic and rich; failing that it creates .venv
# (with the system's site packages, so a preinstalled CUDA torch is reused) and pip-installs them.
# recstack itself runs from src/ (PYTHONPATH), so no install of it is needed.
# Later issues add their GPU paths to scripts/gpu_check.py.
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
LIMIT_S="${GPU_CHECK_LIMIT_S:-480}"

has_gpu() {
  case "${CUDA_VISIBLE_DEVICES-unset}" in
    "" | "-1" | "none" | "NoDevFiles") return 1 ;;
  esac
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    return 0
  fi
  ls /dev/nvidia[0-9]* >/dev/null 2>&1
}

if ! has_gpu; then
  echo "no GPU: skipped"
  exit 0
fi

DEPS_IMPORT="import torch, numpy, yaml, pydantic, rich"
pick_python() {
  local py
  for py in "${RECSTACK_PYTHON:-}" "$REPO/.venv/bin/python" python3; do
    [ -n "$py" ] || continue
    command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c "$DEPS_IMPORT" >/dev/null 2>&1; then
      echo "$py"
      return 0
    fi
  done
  return 1
}

if ! PY="$(pick_python)"; then
  echo "gpu-check: setting up .venv (torch numpy pyyaml pydantic rich matplotlib)" >&2
  if python3 -m venv --system-site-packages .venv >&2 &&
    .venv/bin/python -m pip install -q torch numpy pyyaml pydantic rich matplotlib >&2 &&
    .venv/bin/python -c "$DEPS_IMPORT" >/dev/null 2>&1; then
    PY="$REPO/.venv/bin/python"
  else
    echo "FAIL setup: no Python with torch, numpy, pyyaml, pydantic and rich, and pip could not install them"
    exit 1
  fi
fi

export PYTHONPATH="$REPO/src:$REPO/scripts${PYTHONPATH:+:$PYTHONPATH}"
export RECSTACK_PROGRESS=never
timeout --kill-after=10 "$LIMIT_S" "$PY" "$REPO/scripts/gpu_check.py"
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "FAIL gpu-check: not finished within ${LIMIT_S} s"
  exit 1
fi
exit "$rc"
