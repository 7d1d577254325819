# SPDX-License-Identifier: BSD-3-Clause
# Sourced by scripts/gpu_check.sh and gpu_bench.sh: makes ringloader's build
# dependencies (not torch) findable on a GPU machine. Uses the machine's own
# where dpkg says they are installed, else apt, else the .gpu-deps bundle
# (scripts/gpu_deps_bundle.sh). Sets GPU_DEPS_CMAKE, an array for cmake.
GPU_DEPS_CMAKE=()
BUILD_DEPS=(build-essential cmake pkg-config ninja-build libturbojpeg0-dev
  libjpeg62-turbo-dev libstb-dev libtbb-dev libgtest-dev nlohmann-json3-dev zlib1g-dev)
missing=()
for package in "${BUILD_DEPS[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
[ -n "${GPU_DEPS_FORCE_BUNDLE:-}" ] && missing+=(forced)
if [ ${#missing[@]} -gt 0 ] && [ -d .gpu-deps/usr ]; then
  # No apt on the lent machines: the bundle, never a wait for a network.
  DEPS="$PWD/.gpu-deps/usr"
  mkdir -p "$DEPS/lib/missing"
  for lib in "$DEPS"/lib/fallback/*; do  # the machine's own copy wins
    ldconfig -p | grep -q " $(basename "$lib") " || ln -sf "$lib" "$DEPS/lib/missing/"
  done
  export PATH="$DEPS/bin:$PATH"
  export PKG_CONFIG_PATH="$DEPS/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
  export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:$DEPS/lib/missing:${LD_LIBRARY_PATH:-}"
  GPU_DEPS_CMAKE=(-DCMAKE_PREFIX_PATH="$DEPS;$DEPS/lib/x86_64-linux-gnu/cmake/opencv4"
    -DCMAKE_INCLUDE_PATH="$DEPS/include" -DCMAKE_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu"
    -DZLIB_ROOT="$DEPS" -DJPEG_ROOT="$DEPS" -DGTest_ROOT="$DEPS")
  echo "gpu_deps_env: ${missing[*]} from .gpu-deps"
elif [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" ||
    { echo "gpu_deps_env: missing ${missing[*]}, no apt, no .gpu-deps"; return 1; }
fi
