#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan+UBSan) in build-fuzz and runs
# each for FUZZ_SECONDS (default 30) from seed corpora; fails on any crash,
# leak, sanitizer report or harness abort. Findings land in build-fuzz/findings.
# The mutation seed is fixed (FUZZ_SEED, default 1) so that runs start from
# the same mutations; runs are bounded by time, so how far they get still
# varies with the machine. Set another seed to explore further.
#   scripts/fuzz.sh                 every harness
#   FUZZ_SECONDS=600 scripts/fuzz.sh fuzz_decode_png
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-fuzz
SECONDS_EACH=${FUZZ_SECONDS:-30}
SEED=${FUZZ_SEED:-1}
HARNESSES=("$@")
if [ ${#HARNESSES[@]} -eq 0 ]; then
  HARNESSES=(fuzz_decode_jpeg fuzz_decode_png fuzz_decode_bmp fuzz_decode_gif fuzz_pipeline_json)
fi
GENERATOR=()
# Line tables are all a sanitizer's stack trace needs, and -O1 keeps
# reports exact: together they halve the compile time of -O2 -g.
SANITIZER_OPT="-O1 -g1"
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_FLAGS_RELWITHDEBINFO="$SANITIZER_OPT" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$SANITIZER_OPT" \
    -DRINGLOADER_FUZZ=ON -DRINGLOADER_WITH_CUDA=OFF -DRINGLOADER_BUILD_TESTS=OFF \
    -DRINGLOADER_BUILD_SAMPLES=OFF -DRINGLOADER_BUILD_BENCH=OFF -DRINGLOADER_BUILD_PYTHON=OFF \
    > "$BUILD-configure.log" 2>&1 || { tail -30 "$BUILD-configure.log"; exit 1; }
fi
cmake --build "$BUILD" -j "$(nproc)" --target "${HARNESSES[@]}"
/usr/bin/python3 scripts/fuzz_seeds.py "$BUILD/seeds"
mkdir -p "$BUILD/findings"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for harness in "${HARNESSES[@]}"; do
  name=${harness#fuzz_}
  seeds="$BUILD/seeds/${name#decode_}"
  corpus="$BUILD/corpus/$name"
  mkdir -p "$corpus"
  echo "== $harness: ${SECONDS_EACH}s"
  status=0
  "$BUILD/$harness" -max_total_time="$SECONDS_EACH" -seed="$SEED" -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$BUILD/findings/$harness-" -print_final_stats=1 \
    "$corpus" "$seeds" > "$BUILD/$harness.log" 2>&1 || status=$?
  # The log keeps the fuzzer's chatter; its verdict is the exit status.
  grep -E "^(stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|Done)" "$BUILD/$harness.log" || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$BUILD/$harness.log"
    echo "fuzz: $harness found a failure; reproduce with: $BUILD/$harness $BUILD/findings/$harness-*"
    exit 1
  fi
done
echo "fuzz: ${#HARNESSES[@]} harnesses ran ${SECONDS_EACH}s each without a failure"
