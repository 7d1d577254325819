#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the GoogleTest
# suites under ctest, the pytest suite, and the sanitizer builds
# (ASan+UBSan and TSan). Exits non-zero on any failure.
#   scripts/test.sh            everything
#   scripts/test.sh --quick    skip the sanitizer builds
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1

scripts/install_deps.sh
export BUILD_DIR="${BUILD_DIR:-build}"
scripts/build.sh

echo "== ctest ($BUILD_DIR)"
(cd "$BUILD_DIR" && ctest --output-on-failure -j 2 --timeout 300)

if [ -d python/tests ] && [ -f "$BUILD_DIR/python/ringloader/__init__.py" ]; then
  echo "== pytest"
  PYTHONPATH="$PWD/$BUILD_DIR/python" /usr/bin/python3 -m pytest -q python/tests
fi

if [ "$QUICK" -eq 0 ]; then
  scripts/sanitizers.sh
fi
