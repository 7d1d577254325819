#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: installs what is missing, builds, and trains the sample
# image classifier on Fashion-MNIST (Debian's dataset-fashion-mnist), fed
# through ringloader. Extra arguments go to the trainer (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
export BUILD_DIR="${BUILD_DIR:-build}"
# The trainer alone (it brings the library and the worker): the test suites
# are scripts/test.sh's to build.
BUILD_TARGETS="ringloader-train" scripts/build.sh
exec "$BUILD_DIR/ringloader-train" "$@"
