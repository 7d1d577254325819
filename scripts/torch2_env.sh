#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Creates, or reuses, the virtual environment with PyPI's torch 2.x that
# CI's second stage installs ringloader into, and prints its folder.
# PyPI's Linux torch is a CUDA build of ~3 GB: its wheels are downloaded
# once into a wheelhouse and the environment is made once per machine,
# keyed by torch version and Python; later runs only check it.
#   scripts/torch2_env.sh            -> ~/.cache/ringloader/venv-torch-2.14.1-py312
#   RINGLOADER_TORCH=2.14.1 RINGLOADER_TORCHVISION=0.29.2  the pair (default: this one)
#   RINGLOADER_CACHE=<folder>        where the wheelhouse and environments live
#   RINGLOADER_PYTHON=<python>       the interpreter (default: a python3.12, else python3)
set -euo pipefail
TORCH="${RINGLOADER_TORCH:-2.14.1}"
TORCHVISION="${RINGLOADER_TORCHVISION:-0.29.2}"
CACHE="${RINGLOADER_CACHE:-$HOME/.cache/ringloader}"
PYTHON="${RINGLOADER_PYTHON:-}"
if [ -z "$PYTHON" ]; then
  # The GPU machines run Python 3.12; pyenv's or the system's, else 3.11.
  for candidate in python3.12 "$HOME/.pyenv/versions/3.12"*/bin/python3.12 /usr/bin/python3; do
    # (a pyenv shim exists even where it cannot run: try each)
    if "$candidate" -c 'import venv' >/dev/null 2>&1; then PYTHON=$(command -v "$candidate"); break; fi
  done
fi
PYVER=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
VENV="$CACHE/venv-torch-$TORCH-py$PYVER"
WHEELS="$CACHE/wheelhouse"
# What the Python suite imports besides torch (the Debian stage has them
# from apt: numpy, pytest, PIL, cloudpickle, scikit-image for parity).
EXTRA=(numpy pillow pytest cloudpickle scikit-build-core)

ready() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$TORCH" "$TORCHVISION" <<'PY' 2>/dev/null
import sys, torch, torchvision, pytest, PIL, numpy, cloudpickle, scikit_build_core
assert torch.__version__.split("+")[0] == sys.argv[1], torch.__version__
assert torchvision.__version__.split("+")[0] == sys.argv[2], torchvision.__version__
PY
}

if ! ready; then
  echo "torch2_env: making $VENV (torch $TORCH, torchvision $TORCHVISION)" >&2
  mkdir -p "$WHEELS"
  # pip download keeps wheels already in the folder: only what is missing
  # crosses the network.
  nice -n 19 "$PYTHON" -m pip download -q --dest "$WHEELS" --find-links "$WHEELS" \
    "torch==$TORCH" "torchvision==$TORCHVISION" "${EXTRA[@]}" >&2
  rm -rf "$VENV"
  nice -n 19 "$PYTHON" -m venv "$VENV" >&2
  nice -n 19 "$VENV/bin/pip" install -q --no-cache-dir --no-index --find-links "$WHEELS" \
    "torch==$TORCH" "torchvision==$TORCHVISION" "${EXTRA[@]}" >&2
  ready || { echo "torch2_env: $VENV does not import torch $TORCH" >&2; exit 1; }
fi
echo "$VENV"
