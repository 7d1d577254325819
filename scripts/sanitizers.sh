#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Sanitizer builds of the parts ringloader owns. libtorch is not built with
# sanitizers, so the suites that need it run under ASan+UBSan only (ASan
# tolerates uninstrumented libraries; TSan does not), and TSan covers the
# torch-free ring protocol and sampler suites, where the concurrency lives.
set -euo pipefail
cd "$(dirname "$0")/.."
GENERATOR=()
SANITIZER_OPT="-O1 -g1"
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi

echo "== ASan+UBSan"
# clang, shared with the fuzzers (scripts/asan_build.sh).
scripts/asan_build.sh ringloader_unit_tests ringloader_loader_tests ringloader-worker
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The torchvision parity suites compare millions of pixels against Python
# references: minutes under ASan for little memory coverage beyond the
# fuzzers (decoders, compiled pipelines) and the other suites. They run in
# the plain build.
build-asan/ringloader_unit_tests --gtest_brief=1 \
  --gtest_filter='-DecodeParity*:TransformParity*'
build-asan/ringloader_loader_tests --gtest_brief=1

echo "== TSan"
# The concurrency lives in the ring protocol: its suites alone, in their own
# binary (the decoders' suites have no threads and take minutes under TSan).
if [ ! -f build-tsan/CMakeCache.txt ]; then
  cmake -S . -B build-tsan "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$SANITIZER_OPT" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$SANITIZER_OPT" \
    -DRINGLOADER_SANITIZE=thread -DRINGLOADER_WITH_CUDA=OFF -DRINGLOADER_BUILD_SAMPLES=OFF \
    -DRINGLOADER_BUILD_BENCH=OFF -DRINGLOADER_BUILD_PYTHON=OFF
fi
cmake --build build-tsan -j "$(nproc)" --target ringloader_protocol_tests
# The lane producer/consumer test maps its control memfd twice (node and
# trainer, as two processes would): TSan tracks happens-before by address,
# so it cannot pair the node's release store with the trainer's acquire load
# through the other mapping and reports the payload as a race. The ring's
# own producer/consumer tests share one mapping and run here.
TSAN_OPTIONS=halt_on_error=1 build-tsan/ringloader_protocol_tests --gtest_brief=1 \
  --gtest_filter='-LaneProtocol.ProducerAndConsumerKeepOrderThroughTwoSlots'
