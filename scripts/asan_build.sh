#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One clang build (build-asan) for everything that runs under ASan+UBSan:
# the GoogleTest suites (scripts/sanitizers.sh) and the libFuzzer harnesses
# (scripts/fuzz.sh). Sharing it compiles the library once with sanitizers
# instead of twice (a separate fuzz build cost CI about 7 minutes on 2
# cores); the harnesses' coverage instrumentation (fuzzer-no-link) in the
# suites' objects costs little at run time.
#   scripts/asan_build.sh <target>...
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${ASAN_BUILD_DIR:-build-asan}
GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
# Line tables are all a sanitizer's stack trace needs, and -O1 keeps
# reports exact: together they halve the compile time of -O2 -g.
OPT="-O1 -gline-tables-only"
# A build configured before the merge (gcc, no harnesses) starts again.
if [ -f "$DIR/CMakeCache.txt" ] && ! grep -q "^RINGLOADER_FUZZ:BOOL=ON" "$DIR/CMakeCache.txt"; then
  rm -rf "$DIR"
fi
if [ ! -f "$DIR/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$OPT" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$OPT" \
    -DRINGLOADER_SANITIZE=address,undefined -DRINGLOADER_FUZZ=ON -DRINGLOADER_WITH_CUDA=OFF \
    -DRINGLOADER_BUILD_SAMPLES=OFF -DRINGLOADER_BUILD_BENCH=OFF -DRINGLOADER_BUILD_PYTHON=OFF \
    > "$DIR-configure.log" 2>&1 || { tail -30 "$DIR-configure.log"; exit 1; }
fi
cmake --build "$DIR" -j "$(nproc)" --target "$@"
