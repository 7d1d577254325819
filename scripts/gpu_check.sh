#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# On a GPU machine, with the torch that is already there (PyPI's 2.x with
# CUDA) and nothing carried but the source: builds ringloader against that
# torch (Torch_DIR from torch.utils.cmake_prefix_path, tests on, this GPU's
# architecture), runs every CUDA test (the GoogleTest CUDA suites and the
# Python ones that need a GPU), then shows that the release fence is what
# the race tests see: with `releaser_->set_fences(...)` taken out they must
# fail. Then, GPU_PIP=1: `pip install --no-build-isolation .` into that
# Python and the CUDA Python tests against the installed package.
#   PYTHON=python3.12 scripts/gpu_check.sh      (default: python3)
# The benchmarks are scripts/gpu_bench.sh (same build folder).
# Build dependencies: the machine's own, else apt, else a .gpu-deps folder
# (scripts/gpu_deps_bundle.sh; lent machines have no network).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BUILD=${BUILD_DIR:-build-gpu}
export PYTHONUNBUFFERED=1
stamp() { echo "== [$(date +%T) +${SECONDS}s] $*"; }
"$PYTHON" - <<'PY'
import torch
print(f"gpu_check: torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"GPU: {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
PY
source scripts/gpu_deps_env.sh || exit 1

# The ImageNet-sized folder of scripts/gpu_bench.sh, made while this builds.
if [ -d .gpu-deps/photos ] && [ ! -f "$BUILD/photos.done" ]; then
  mkdir -p "$BUILD"
  (RINGLOADER_PHOTO_SOURCES="$PWD/.gpu-deps/photos" "$PYTHON" bench/make_photo_folder.py \
     "$BUILD/photos" --preset imagenet --classes 10 --per-class 200 > "$BUILD/photos.log" 2>&1 &&
   touch "$BUILD/photos.done") &
fi

stamp configure
TORCH_DIR="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTorch_DIR="$TORCH_DIR" \
  -DPython3_EXECUTABLE="$(command -v "$PYTHON")" -DCMAKE_CUDA_ARCHITECTURES=native \
  -DRINGLOADER_BUILD_SAMPLES=OFF -DRINGLOADER_BUILD_BENCH="${GPU_BENCH:-ON}" \
  "${GPU_DEPS_CMAKE[@]}" > "$BUILD.configure.log" 2>&1 || { tail -40 "$BUILD.configure.log"; exit 1; }
grep "ringloader:" "$BUILD.configure.log" || true
# GPU_CHECK_ONLY=python: the Python CUDA tests alone (a rerun on a short lease).
ONLY=${GPU_CHECK_ONLY:-all}
TARGETS=(_ringloader ringloader_python ringloader-worker ringloader-python-stub ringloader-shard)
[ "$ONLY" = all ] && TARGETS+=(ringloader_loader_tests)
[ "${GPU_BENCH:-ON}" = ON ] && TARGETS+=(ringloader-gpu-bench)
stamp build "${TARGETS[@]}"
cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]}" > "$BUILD.build.log" 2>&1 ||
  { grep -E "error|FAILED" "$BUILD.build.log" | head -40; exit 1; }

status=0
[ "$ONLY" = all ] && {
stamp "GoogleTest CUDA suites"
timeout 300 "$BUILD/ringloader_loader_tests" \
  --gtest_filter="${GTEST_FILTER:-CudaStage*:CudaRelease*:Distributed.Cuda*:NodeLoader*Cuda*}" \
  2>&1 | grep -vE "^\[ +(RUN|OK) " | tail -40 || status=1
}
read -ra CUDA_TESTS <<< "${CUDA_TESTS:-python/tests/test_cuda_release.py python/tests/test_node_cuda.py python/tests/test_torch_build.py}"
stamp "Python CUDA tests (build tree)"
PYTHONPATH="$BUILD/python" timeout "${PYTEST_TIMEOUT:-400}" "$PYTHON" -m pytest -q -p no:cacheprovider -rs \
  "${CUDA_TESTS[@]}" || status=1

[ "$ONLY" = all ] && {
stamp "the release fence taken out: the race tests must fail"
FENCED=loader/trainer/start_cuda_once.cc
cp "$FENCED" "$BUILD/fenced.cc.orig"
sed -i 's|^\(\s*\)if (pin_.pinned()) releaser_->set_fences(.*|\1(void)0;  // fence removed by gpu_check.sh|' "$FENCED"
if cmp -s "$FENCED" "$BUILD/fenced.cc.orig"; then
  echo "gpu_check: could not take the fence out of $FENCED"; status=1
else
  cmake --build "$BUILD" -j "$(nproc)" --target ringloader_loader_tests _ringloader \
    ringloader_python >> "$BUILD.build.log" 2>&1
  if timeout 120 "$BUILD/ringloader_loader_tests" \
       --gtest_filter="CudaRelease.SlowConsumer*" > "$BUILD.nofence.log" 2>&1; then
    echo "gpu_check: UNFENCED GoogleTest race test PASSED (it cannot see the race)"; status=1
  else
    echo "unfenced GoogleTest race test failed, as it must:"; grep -E "Failure|FAILED|Expected|Which|batch" "$BUILD.nofence.log" | head -8
  fi
  if PYTHONPATH="$BUILD/python" timeout 120 "$PYTHON" -m pytest -q -p no:cacheprovider \
       python/tests/test_cuda_release.py -k slow_consumer > "$BUILD.nofence-py.log" 2>&1; then
    echo "gpu_check: UNFENCED Python race test PASSED (it cannot see the race)"; status=1
  else
    echo "unfenced Python race test failed, as it must:"; grep -E "^FAILED|AssertionError|assert" "$BUILD.nofence-py.log" | head -6
  fi
fi
cp "$BUILD/fenced.cc.orig" "$FENCED"
cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]}" >> "$BUILD.build.log" 2>&1 || status=1
}

if [ "${GPU_PIP:-0}" = 1 ]; then
  stamp "pip install --no-build-isolation . and the same tests installed"
  if "$PYTHON" -m pip install -q --no-build-isolation --no-deps \
       -C build-dir="build/pip-gpu" -C cmake.define.CMAKE_CUDA_ARCHITECTURES=native .; then
    WORK=$(mktemp -d); cp -r python/tests "$WORK/tests"
    (cd "$WORK" && RINGLOADER_BUILD_DIR="$WORK/none" "$PYTHON" -m pytest -q -p no:cacheprovider \
       "${CUDA_TESTS[@]/python\//}") || status=1
    rm -rf "$WORK"
  else
    status=1
  fi
fi
stamp "done, status $status"
exit $status
