#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# On a GPU machine, with the torch that is already there (PyPI's 2.x with
# CUDA) and nothing carried but the source: builds ringloader against that
# torch (Torch_DIR from torch.utils.cmake_prefix_path, tests on, this GPU's
# architecture), runs every CUDA test (the GoogleTest CUDA suites and the
# Python ones that need a GPU), then `pip install --no-build-isolation .`
# into that Python and runs the CUDA Python tests against the installed
# package, and the GPU benchmark.
#   PYTHON=python3.12 scripts/gpu_check.sh      (default: python3)
# Debian's -dev packages it needs (not torch) come from apt when missing;
# a .gpu-deps folder (scripts/gpu_deps_bundle.sh), if present, is used as
# a fallback on a machine without apt access.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BUILD=${BUILD_DIR:-build-gpu}
"$PYTHON" - <<'PY'
import torch
print(f"gpu_check: torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"GPU: {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
PY

# Build dependencies without torch (scripts/install_deps.sh has the full list).
BUILD_DEPS=(build-essential cmake pkg-config ninja-build libturbojpeg0-dev
  libjpeg62-turbo-dev libstb-dev libtbb-dev libgtest-dev nlohmann-json3-dev zlib1g-dev)
missing=()
for package in "${BUILD_DEPS[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
EXTRA=()
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
           --no-install-recommends "${missing[@]}"; }; then
    [ -d .gpu-deps/usr ] || { echo "gpu_check: missing ${missing[*]}, no apt, no .gpu-deps"; exit 1; }
    DEPS="$PWD/.gpu-deps/usr"
    export PKG_CONFIG_PATH="$DEPS/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
    export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
    EXTRA=(-DCMAKE_PREFIX_PATH="$DEPS" -DCMAKE_INCLUDE_PATH="$DEPS/include"
           -DCMAKE_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu")
  fi
fi

TORCH_DIR="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTorch_DIR="$TORCH_DIR" \
  -DPython3_EXECUTABLE="$(command -v "$PYTHON")" -DCMAKE_CUDA_ARCHITECTURES=native \
  -DRINGLOADER_BUILD_SAMPLES=OFF -DRINGLOADER_BUILD_BENCH="${GPU_BENCH:-ON}" "${EXTRA[@]}" \
  > "$BUILD.configure.log" 2>&1 || { tail -40 "$BUILD.configure.log"; exit 1; }
grep "ringloader:" "$BUILD.configure.log" || true
cmake --build "$BUILD" -j "$(nproc)" --target ringloader_loader_tests _ringloader \
  ringloader_python ringloader-worker ringloader-shard $([ "${GPU_BENCH:-ON}" = ON ] &&
  echo ringloader-gpu-bench) 2>&1 | grep -E "error|FAILED" | head -40 || true

status=0
echo "== gpu_check: GoogleTest CUDA suites"
"$BUILD/ringloader_loader_tests" \
  --gtest_filter="${GTEST_FILTER:-CudaStage*:CudaRelease*:Distributed.Cuda*:NodeLoader*Cuda*}" \
  2>&1 | tail -40 || status=1
CUDA_TESTS=(python/tests/test_cuda_release.py python/tests/test_node_loader.py
            python/tests/test_torch_build.py)
echo "== gpu_check: Python CUDA tests (build tree)"
PYTHONPATH="$BUILD/python" "$PYTHON" -m pytest -q -p no:cacheprovider "${CUDA_TESTS[@]}" \
  -k "cuda or gpu or torch_build" || status=1

echo "== gpu_check: pip install --no-build-isolation . and the same tests installed"
if "$PYTHON" -m pip install -q --no-build-isolation --no-deps \
     -C build-dir="build/pip-gpu" -C cmake.define.CMAKE_CUDA_ARCHITECTURES=native .; then
  WORK=$(mktemp -d); cp -r python/tests "$WORK/tests"
  (cd "$WORK" && RINGLOADER_BUILD_DIR="$WORK/none" "$PYTHON" -m pytest -q -p no:cacheprovider \
     tests/test_cuda_release.py tests/test_node_loader.py tests/test_torch_build.py \
     -k "cuda or gpu or torch_build") || status=1
  rm -rf "$WORK"
else
  status=1
fi

if [ -x "$BUILD/ringloader-gpu-bench" ]; then
  DATA=/usr/share/datasets/fashion-mnist
  [ -d .gpu-deps/data ] && DATA="$PWD/.gpu-deps/data"
  if [ -f "$DATA/train-images-idx3-ubyte.gz" ]; then
    echo "== ringloader (device=cuda, ring pinned)"
    "$BUILD/ringloader-gpu-bench" "$DATA/train-images-idx3-ubyte.gz" "$DATA/train-labels-idx1-ubyte.gz"
    echo "== torch DataLoader (pin_memory, non_blocking)"
    "$PYTHON" bench/gpu/torch_side_gpu.py "$DATA/train-images-idx3-ubyte.gz" \
      "$DATA/train-labels-idx1-ubyte.gz"
  fi
fi
exit $status
