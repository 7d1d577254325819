#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Packs this Debian machine's build dependencies that a bare GPU test box may
# lack (oneTBB, libjpeg-turbo, stb, OpenCV core/imgproc) into .gpu-deps/usr,
# laid out like /usr so their CMake and pkg-config files stay relocatable.
# Used to run the CUDA checks on a lent GPU machine (see docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=.gpu-deps/usr
rm -rf .gpu-deps && mkdir -p "$OUT/include" "$OUT/lib/x86_64-linux-gnu/cmake" "$OUT/lib/x86_64-linux-gnu/pkgconfig"
LIB=/usr/lib/x86_64-linux-gnu
cp -a /usr/include/tbb /usr/include/oneapi /usr/include/stb /usr/include/turbojpeg.h "$OUT/include/"
cp -a $LIB/libtbb*.so* $LIB/libturbojpeg.so* "$OUT/lib/x86_64-linux-gnu/"
cp -a $LIB/cmake/TBB "$OUT/lib/x86_64-linux-gnu/cmake/"
sed "s|^prefix=.*|prefix=\${pcfiledir}/../../..|; s|^exec_prefix=.*|exec_prefix=\${prefix}|; s|^libdir=.*|libdir=\${prefix}/lib/x86_64-linux-gnu|; s|^includedir=.*|includedir=\${prefix}/include|" \
  $LIB/pkgconfig/libturbojpeg.pc > "$OUT/lib/x86_64-linux-gnu/pkgconfig/libturbojpeg.pc"
if [ "${WITH_OPENCV:-0}" = 1 ]; then
  cp -a /usr/include/opencv4 "$OUT/include/"
  for lib in core imgproc imgcodecs; do cp -a $LIB/libopencv_$lib.so* "$OUT/lib/x86_64-linux-gnu/"; done
  cp -a $LIB/cmake/opencv4 "$OUT/lib/x86_64-linux-gnu/cmake/"
fi
mkdir -p .gpu-deps/data && cp /usr/share/datasets/fashion-mnist/*.gz .gpu-deps/data/
du -sh .gpu-deps
