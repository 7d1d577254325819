#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the libFuzzer harnesses (clang, ASan+UBSan) in build-asan, the
# sanitizer suites' build (scripts/asan_build.sh), and runs
# them from the seed corpora plus the regression inputs in
# tests/fuzz/regressions/<harness>/ (every past finding); fails on any crash,
# leak, sanitizer report or harness abort. Findings land in
# build-asan/findings.
#
# Default (CI): each harness runs a fixed number of inputs (-runs) from a
# fixed mutation seed (FUZZ_SEED, default 1) and a fresh corpus, so the
# same commit reaches the same inputs on every machine: a commit whose CI
# passed once passes again. FUZZ_RUNS scales every harness's run count
# (a percentage, default 100).
# --long: bounded by time instead (FUZZ_SECONDS each, default 600), a random
# seed and a corpus kept between runs, to explore; copy what it finds into
# tests/fuzz/regressions/<harness>/ so CI replays it from then on.
#   scripts/fuzz.sh                         every harness, CI's run
#   scripts/fuzz.sh --long fuzz_decode_png  ten minutes of one harness
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${ASAN_BUILD_DIR:-build-asan}
LONG=0
if [ "${1:-}" = "--long" ]; then LONG=1; shift; fi
SECONDS_EACH=${FUZZ_SECONDS:-600}
SEED=${FUZZ_SEED:-1}
RUNS_PERCENT=${FUZZ_RUNS:-100}
# Inputs per harness in CI: about 20 s each on CI's 2 cores (its log of
# 2026-11-27 gave each harness's inputs per second).
declare -A RUNS=([fuzz_decode_jpeg]=500000 [fuzz_decode_png]=400000
                 [fuzz_decode_bmp]=120000 [fuzz_decode_gif]=500000
                 [fuzz_pipeline_json]=300000 [fuzz_lane_protocol]=40000
                 [fuzz_slot_protocol]=60000 [fuzz_tar_shard]=180000
                 [fuzz_sample_names]=1500)
HARNESSES=("$@")
if [ ${#HARNESSES[@]} -eq 0 ]; then
  HARNESSES=(fuzz_decode_jpeg fuzz_decode_png fuzz_decode_bmp fuzz_decode_gif fuzz_pipeline_json
             fuzz_lane_protocol fuzz_slot_protocol fuzz_tar_shard fuzz_sample_names)
fi
ASAN_BUILD_DIR="$BUILD" scripts/asan_build.sh "${HARNESSES[@]}"
/usr/bin/python3 scripts/fuzz_seeds.py "$BUILD/seeds"
mkdir -p "$BUILD/findings"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for harness in "${HARNESSES[@]}"; do
  name=${harness#fuzz_}
  seeds="$BUILD/seeds/${name#decode_}"
  mkdir -p "$seeds"  # harnesses without seed files (fuzz_lane_protocol) start empty
  corpus="$BUILD/corpus/$name"
  regressions="tests/fuzz/regressions/$harness"
  dirs=("$corpus" "$seeds")
  [ -d "$regressions" ] && dirs+=("$regressions")
  if [ "$LONG" -eq 1 ]; then
    bound=(-max_total_time="$SECONDS_EACH" -seed=0)
    echo "== $harness: ${SECONDS_EACH}s, random seed"
  else
    rm -rf "$corpus"  # a fresh corpus: the same inputs on every machine
    bound=(-runs=$(( ${RUNS[$harness]} * RUNS_PERCENT / 100 )) -seed="$SEED")
    echo "== $harness: ${bound[0]#-}, seed $SEED"
  fi
  mkdir -p "$corpus"
  status=0
  "$BUILD/$harness" "${bound[@]}" -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$BUILD/findings/$harness-" -print_final_stats=1 \
    "${dirs[@]}" > "$BUILD/$harness.log" 2>&1 || status=$?
  # The log keeps the fuzzer's chatter; its verdict is the exit status.
  grep -E "^(stat::number_of_executed_units|stat::average_exec_per_sec|==[0-9]+==ERROR|SUMMARY|Done)" \
    "$BUILD/$harness.log" || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$BUILD/$harness.log"
    echo "fuzz: $harness found a failure; reproduce with: $BUILD/$harness $BUILD/findings/$harness-*"
    echo "fuzz: once fixed, keep the input: cp $BUILD/findings/$harness-* $regressions/"
    exit 1
  fi
done
echo "fuzz: ${#HARNESSES[@]} harnesses ran without a failure"
