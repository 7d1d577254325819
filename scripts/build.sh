#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Configures and builds ringloader into BUILD_DIR (default: build).
#   scripts/build.sh [extra cmake args...]
#   BUILD_TARGETS="ringloader-train" scripts/build.sh   only those targets
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DPython3_EXECUTABLE=/usr/bin/python3 "$@"
fi
TARGETS=()
if [ -n "${BUILD_TARGETS:-}" ]; then TARGETS=(--target $BUILD_TARGETS); fi
cmake --build "$BUILD_DIR" -j "$(nproc)" "${TARGETS[@]}"
