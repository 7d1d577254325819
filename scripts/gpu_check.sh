#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds with CUDA against the PyTorch found by `python3` (libtorch 2.x with
# CUDA) and runs the GPU tests and benchmark. Meant for a GPU machine; uses
# .gpu-deps (scripts/gpu_deps_bundle.sh) for libraries it may lack.
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS="$PWD/.gpu-deps/usr"
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
export PKG_CONFIG_PATH="$DEPS/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
BUILD=${BUILD_DIR:-build-gpu}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$DEPS" -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_INCLUDE_PATH="$DEPS/include" -DCMAKE_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu" \
  -DRINGLOADER_BUILD_PYTHON=OFF -DRINGLOADER_BUILD_SAMPLES=OFF -DRINGLOADER_BUILD_BENCH=${GPU_BENCH:-ON} \
  > "$BUILD.configure.log" 2>&1 || { tail -40 "$BUILD.configure.log"; exit 1; }
grep "ringloader:" "$BUILD.configure.log" || true
cmake --build "$BUILD" -j "$(nproc)" 2>&1 | grep -E "error|FAILED|warning: " | head -40 || true
cmake --build "$BUILD" -j "$(nproc)" >/dev/null
"$BUILD/ringloader_loader_tests" --gtest_filter="${GTEST_FILTER:-CudaStage*}" 2>&1 | tail -40
if [ -x "$BUILD/ringloader-gpu-bench" ]; then
  DATA="$PWD/.gpu-deps/data"
  [ -d "$DATA" ] || DATA=/usr/share/datasets/fashion-mnist
  echo "== ringloader (device=cuda, ring pinned)"
  "$BUILD/ringloader-gpu-bench" "$DATA/train-images-idx3-ubyte.gz" "$DATA/train-labels-idx1-ubyte.gz"
  echo "== torch DataLoader (pin_memory, non_blocking)"
  python3 bench/gpu/torch_side_gpu.py "$DATA/train-images-idx3-ubyte.gz" "$DATA/train-labels-idx1-ubyte.gz"
fi
