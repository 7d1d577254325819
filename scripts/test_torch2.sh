#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# CI's torch 2.x stage (issue 26): into the cached virtual environment with
# PyPI's torch (scripts/torch2_env.sh), `pip install --no-build-isolation .`,
# then, from outside the source tree and against the installed package only:
# the Python suite, `python -m ringloader` on a script, and a C++ project
# built with find_package(ringloader) (tests/consumer).
#   scripts/test_torch2.sh [pytest args...]   e.g. -k hold_batches
# $RINGLOADER_TORCH2_TESTS overrides which test files run (default: all, in
# two concurrent halves).
set -euo pipefail
cd "$(dirname "$0")/.."
SOURCE=$PWD
STAGE_START=$SECONDS
stage_done() {
  echo "== torch2: $1 took $((SECONDS - STAGE_START)) s"
  STAGE_START=$SECONDS
}

VENV=$(scripts/torch2_env.sh)
PY="$VENV/bin/python"
TORCH=$("$PY" -c 'import torch; print(torch.__version__)')
stage_done "environment ($VENV, torch $TORCH)"

# The fault points stay compiled in for the suite (tests arm them); a build
# folder of its own, kept between runs. CMAKE_ARGS (e.g. a ccache launcher)
# reaches CMake through scikit-build-core.
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
  "$VENV/bin/pip" install -q --no-build-isolation --no-deps --no-cache-dir \
  -C build-dir="build/pip-ci-torch$TORCH" \
  -C cmake.define.RINGLOADER_FAULT_INJECTION=ON .
stage_done "pip install"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp -r python/tests "$WORK/tests"
cd "$WORK"
# The installed package, never the source or a build tree.
"$PY" - "$VENV" <<'PY'
import os, sys, ringloader
assert ringloader.__file__.startswith(sys.argv[1]), ringloader.__file__
print("== torch2: ringloader from", os.path.dirname(ringloader.__file__))
PY

cat > "$WORK/script.py" <<'PY'
import torch
from torch.utils.data import DataLoader, TensorDataset
data = TensorDataset(torch.arange(40.0).reshape(20, 2), torch.arange(20))
loader = DataLoader(data, batch_size=4, shuffle=False, num_workers=2)
total = sum(int(y.sum()) for _, y in loader)
print(type(loader).__module__, total)
PY
out=$("$PY" -m ringloader "$WORK/script.py")
echo "== torch2: python -m ringloader script.py: $out"
[[ "$out" == ringloader*" 190" ]] || { echo "python -m ringloader did not swap the DataLoader"; exit 1; }

PREFIX="$("$PY" -c 'import ringloader; print(ringloader.cmake_prefix_path)')"
cmake -S "$SOURCE/tests/consumer" -B "$WORK/consumer" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" > "$WORK/consumer.log" 2>&1 ||
  { cat "$WORK/consumer.log"; exit 1; }
cmake --build "$WORK/consumer" >> "$WORK/consumer.log" 2>&1 ||
  { cat "$WORK/consumer.log"; exit 1; }
"$PY" -c 'import sys; sys.path.insert(0, "tests"); import conftest; conftest.write_image_folder("images")'
"$WORK/consumer/consumer" "$WORK/images"
stage_done "installed smoke runs (python -m ringloader, find_package consumer)"

# conftest.py would add a build tree's python/ to sys.path if one were next
# to the tests; none is. The source only lends scripts/ (test_op_specs).
# The suite against the installed package only (no build tree on the path).
pytest_installed() {
  RINGLOADER_BUILD_DIR="$WORK/no-build-tree" RINGLOADER_SOURCE_DIR="$SOURCE" \
    "$PY" -X faulthandler -m pytest -q -p no:cacheprovider "$@"
}
# By default two pytest processes: most tests wait on worker processes
# starting and exiting, so one process leaves a core idle. The files are
# dealt by measured time (tests/shards.py, $RINGLOADER_PYTEST_SHARD; dealt
# by size they took 406 and 241 s). Each half has its own basetemp (pytest
# prunes numbered temp folders it thinks are its own) and its own log.
# A half whose interpreter died of a signal (not a failing test) runs once
# more, and its crash is shown. The one such death understood so far:
# CPython 3.12.1's collector crashes on a BytesIO.getbuffer() view in a
# reference cycle (python/cpython#111049, #111331), and torch's own
# DataLoader, run beside ours in many tests, sends every index message
# through such a view (multiprocessing's ForkingPickler.dumps); a core held
# one. tests/bytesio_export_workaround.py (applied by conftest) removes the
# view. Up to two reruns remain for deaths not yet understood; a third
# death, or any failing test, fails the stage. -X faulthandler prints the
# Python stack of a death.
run_half() {
  local name=$1; local -x RINGLOADER_PYTEST_SHARD=$2; shift 2
  local status attempt
  : > "$WORK/pytest-$name.crash"
  for attempt in 1 2 3; do
    status=0
    pytest_installed --basetemp="$WORK/pytest-$name-$attempt" "$@" \
      > "$WORK/pytest-$name.log" 2>&1 || status=$?
    [ "$status" -gt 128 ] || break
    { echo "== torch2: pytest half $name: the interpreter died of signal $((status - 128)):"
      grep -A14 "Fatal Python error" "$WORK/pytest-$name.log" | head -24 || true
      if [ "$attempt" -lt 3 ]; then echo "== torch2: pytest half $name: run once more"; fi; } \
      >> "$WORK/pytest-$name.crash"
  done
  [ -s "$WORK/pytest-$name.crash" ] || rm -f "$WORK/pytest-$name.crash"
  return "$status"
}
if [ -n "${RINGLOADER_TORCH2_TESTS:-}" ] || [ $# -gt 0 ]; then
  TESTS=(${RINGLOADER_TORCH2_TESTS:-tests})
  pytest_installed "${TESTS[@]}" "$@"
else
  status_a=0 status_b=0
  run_half a 1/2 tests & pid_a=$!
  run_half b 2/2 tests || status_b=$?
  wait "$pid_a" || status_a=$?
  for half in a b; do
    if [ -f "$WORK/pytest-$half.crash" ]; then cat "$WORK/pytest-$half.crash"; fi
    echo "== torch2: pytest half $half: $(tail -1 "$WORK/pytest-$half.log")"
  done
  if [ "$status_a" -ne 0 ] || [ "$status_b" -ne 0 ]; then
    for half in a b; do grep -E "^(FAILED|ERROR)" "$WORK/pytest-$half.log" || true; done
    tail -n 60 "$WORK/pytest-a.log" "$WORK/pytest-b.log"
    exit 1
  fi
fi
stage_done "pytest"
