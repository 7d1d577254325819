#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what is missing, builds, and runs every test: the GoogleTest
# suites, the pytest suite and the sample's smoke run under ctest, a 2-minute
# soak (scripts/soak.py; $SOAK_SEED picks its second seed), the torch 2.x
# stage (scripts/test_torch2.sh: pip install into a cached venv with PyPI's
# torch, the Python suite against the installed package;
# RINGLOADER_TORCH2=0 skips it), then the sanitizer builds (ASan+UBSan and
# TSan) and the fuzzers (a fixed number of inputs each, from a fixed seed).
# Exits non-zero on any failure.
#   scripts/test.sh            everything
#   scripts/test.sh --quick    skip the sanitizer builds and fuzzers
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1

# Each stage's wall time, so CI logs show where its budget goes.
# The summary repeats as the last line, even on failure: CI shows a log's
# tail only.
STAGE_START=$SECONDS
STAGE_TIMES=""
stage_done() {
  echo "== $1 took $((SECONDS - STAGE_START)) s"
  STAGE_TIMES="$STAGE_TIMES $1 $((SECONDS - STAGE_START)) s;"
  STAGE_START=$SECONDS
}
trap 'echo "== stage times:$STAGE_TIMES running $((SECONDS - STAGE_START)) s; total $SECONDS s"' EXIT

scripts/install_deps.sh
stage_done "install"
export BUILD_DIR="${BUILD_DIR:-build}"
scripts/build.sh
stage_done "build"

# The public scripts test_unchanged_variable_scripts.py runs unchanged
# (torchvision's detection reference, pycocotools): best effort, their
# tests skip, saying so, where the registries cannot be reached.
scripts/get_real_scripts.sh || echo "== real scripts not fetched: their tests skip"
stage_done "real scripts"

echo "== ctest ($BUILD_DIR): C++ suites, pytest, sample smoke run"
LOG="$BUILD_DIR/ctest.log"
# Tests that act as another user (nobody) need root and skip without it:
# each writes a line here (tests/unit/cross_user.h, the cross_user marker in
# python/tests/conftest.py), so the log says how many ran.
case "$BUILD_DIR" in /*) CROSS_USER_LOG="$BUILD_DIR/cross_user.log" ;;
                    *) CROSS_USER_LOG="$PWD/$BUILD_DIR/cross_user.log" ;; esac
rm -f "$CROSS_USER_LOG"
(cd "$BUILD_DIR" && RINGLOADER_CROSS_USER_LOG="$CROSS_USER_LOG" \
   ctest --output-on-failure -j 2 --timeout 600) | tee "$LOG"
cross_user() { if [ -f "$CROSS_USER_LOG" ]; then grep -c " $1\$" "$CROSS_USER_LOG" || true; else echo 0; fi; }
echo "== cross-user tests (as uid $(id -u)): $(cross_user ran) ran, $(cross_user skipped) skipped" \
     "($CROSS_USER_LOG)"
if [ "$(id -u)" = 0 ] && [ "$(cross_user ran)" = 0 ]; then
  echo "no cross-user test ran as root: they no longer report (tests/unit/cross_user.h)"; exit 1
fi
stage_done "ctest"

# A short soak (scripts/soak.py, docs/faults.md): random worker kills, stops,
# hangs, forks, broken-off loops and Ctrl-C, each batch compared with an
# undisturbed epoch. Seed 0 for 1 minute, then a seed drawn for this run
# (printed: the same seed replays the same rounds and faults).
soak() {
  local minutes=$1 seed=$2 log="$BUILD_DIR/soak-seed-$2.log"
  echo "== soak: --minutes $minutes --seed $seed (replay: PYTHONPATH=$BUILD_DIR/python" \
       "/usr/bin/python3 scripts/soak.py --minutes $minutes --seed $seed)"
  if ! PYTHONPATH="$BUILD_DIR/python" /usr/bin/python3 scripts/soak.py \
      --minutes "$minutes" --seed "$seed" 2> "$log"; then
    echo "== soak with seed $seed failed; the end of its stderr ($log):"
    tail -n 40 "$log"
    return 1
  fi
}
soak 1 0
soak 1 "${SOAK_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
stage_done "soak"

# The same package under PyPI's torch 2.x (docs/install.md): a cached
# virtual environment, pip install . into it, the Python suite against the
# installed package. Cold (fresh clone, no ccache) about 10 min of build;
# RINGLOADER_TORCH2=0 skips it where PyPI cannot be reached.
if [ "${RINGLOADER_TORCH2:-1}" = 1 ]; then
  scripts/test_torch2.sh
  stage_done "torch2"
fi

if [ "$QUICK" -eq 0 ]; then
  scripts/sanitizers.sh
  stage_done "sanitizers"
  echo "== libFuzzer: decoders and the pipeline JSON parser"
  scripts/fuzz.sh  # bounded by run count with a fixed seed: deterministic
  stage_done "fuzzers"
fi

# One plain closing line for CI: the ctest totals (sanitizer suites above
# abort the script on any failure).
failed=$(grep -oE '[0-9]+ tests failed' "$LOG" | tail -1 | grep -oE '^[0-9]+' || true)
total=$(grep -oE 'out of [0-9]+' "$LOG" | tail -1 | grep -oE '[0-9]+' || true)
echo "ctest: $(( ${total:-0} - ${failed:-0} )) passed, ${failed:-0} failed; all stages ${SECONDS} s"
