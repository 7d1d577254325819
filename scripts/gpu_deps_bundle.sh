#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Packs what a bare GPU test box (no apt, no network: the lent machines of
# docs/gpu.md) lacks to build ringloader against its own torch: the headers,
# CMake and pkg-config files and shared libraries of oneTBB, libjpeg-turbo
# (TurboJPEG and libjpeg), stb, zlib's headers, nlohmann-json, GoogleTest,
# pkgconf, and OpenCV core/imgproc with the libraries they load. Everything
# lands in .gpu-deps/usr, laid out like /usr so the CMake and pkg-config files
# stay relocatable; libraries that the box may already have go to
# .gpu-deps/usr/lib/fallback and are used only where the box has none
# (scripts/gpu_check.sh). Also the fashion-mnist files and the source
# photographs of bench/make_photo_folder.py. Debian 12's glibc is 2.36, so
# these run on any newer one.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=.gpu-deps/usr
LIB=/usr/lib/x86_64-linux-gnu
DEST="$OUT/lib/x86_64-linux-gnu"
rm -rf .gpu-deps && mkdir -p "$OUT/include" "$OUT/bin" "$DEST/cmake" "$DEST/pkgconfig" \
  "$OUT/lib/fallback" "$OUT/share/cmake"
cp -a /usr/include/tbb /usr/include/oneapi /usr/include/stb /usr/include/turbojpeg.h \
  /usr/include/jpeglib.h /usr/include/jerror.h /usr/include/jmorecfg.h \
  /usr/include/x86_64-linux-gnu/jconfig.h /usr/include/zlib.h /usr/include/zconf.h \
  /usr/include/nlohmann /usr/include/gtest /usr/include/gmock "$OUT/include/"
cp -a $LIB/libtbb*.so* $LIB/libturbojpeg.so* $LIB/libjpeg.so* $LIB/libgtest*.a \
  $LIB/libgmock*.a "$DEST/"
cp -a $LIB/cmake/TBB $LIB/cmake/GTest "$DEST/cmake/"
cp -a /usr/share/cmake/nlohmann_json "$OUT/share/cmake/"
sed "s|^prefix=.*|prefix=\${pcfiledir}/../../..|; s|^exec_prefix=.*|exec_prefix=\${prefix}|; s|^libdir=.*|libdir=\${prefix}/lib/x86_64-linux-gnu|; s|^includedir=.*|includedir=\${prefix}/include|" \
  $LIB/pkgconfig/libturbojpeg.pc > "$DEST/pkgconfig/libturbojpeg.pc"
# pkgconf, with its library beside it, behind a wrapper that finds it.
mkdir -p "$OUT/lib/pkgconf"
cp -a /usr/bin/pkgconf $LIB/libpkgconf.so* "$OUT/lib/pkgconf/"
cat > "$OUT/bin/pkg-config" <<'WRAP'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")/../lib/pkgconf
LD_LIBRARY_PATH="$here" exec "$here/pkgconf" "$@"
WRAP
chmod +x "$OUT/bin/pkg-config"
# Named libz.so only: the box's own libz.so.1 is the one that runs.
cp "$(readlink -f $LIB/libz.so)" "$DEST/libz.so"
if [ "${WITH_OPENCV:-1}" = 1 ]; then
  cp -a /usr/include/opencv4 "$OUT/include/"
  for lib in core imgproc; do cp -a $LIB/libopencv_$lib.so* "$DEST/"; done
  # OpenCV's own config wants every module's library: this one names two.
  mkdir -p "$DEST/cmake/opencv4" && cat > "$DEST/cmake/opencv4/OpenCVConfig.cmake" <<'CFG'
get_filename_component(_cv_lib "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
get_filename_component(_cv_include "${_cv_lib}/../../include/opencv4" ABSOLUTE)
set(OpenCV_VERSION 4.6.0)
set(OpenCV_INCLUDE_DIRS "${_cv_include}")
foreach(_cv core imgproc)
  if(NOT TARGET opencv_${_cv})
    add_library(opencv_${_cv} SHARED IMPORTED)
    set_target_properties(opencv_${_cv} PROPERTIES
      IMPORTED_LOCATION "${_cv_lib}/libopencv_${_cv}.so.406"
      INTERFACE_INCLUDE_DIRECTORIES "${_cv_include}")
  endif()
endforeach()
set(OpenCV_LIBS opencv_core opencv_imgproc)
set(OpenCV_FOUND TRUE)
CFG
  printf 'set(PACKAGE_VERSION 4.6.0)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' \
    > "$DEST/cmake/opencv4/OpenCVConfig-version.cmake"
  # What libopencv_core and _imgproc load beyond glibc, libstdc++ and TBB.
  for needed in $(ldd $LIB/libopencv_core.so.406 $LIB/libopencv_imgproc.so.406 |
                  awk '/=>/ {print $3}' | sort -u); do
    case "$(basename "$needed")" in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|libtbb*|libopencv*|libz.so*|libpthread*|libdl*|librt*) ;;
      *) cp -L "$needed" "$OUT/lib/fallback/" ;;
    esac
  done
fi
mkdir -p .gpu-deps/data .gpu-deps/photos
# The test split: 4.4 MB against the train split's 26, within what travels.
cp /usr/share/datasets/fashion-mnist/t10k-*.gz .gpu-deps/data/
SKIMAGE=/usr/lib/python3/dist-packages/skimage/data
for photo in astronaut.png chelsea.png coffee.png rocket.jpg motorcycle_left.png \
             motorcycle_right.png retina.jpg hubble_deep_field.jpg ihc.png; do
  [ -f "$SKIMAGE/$photo" ] && cp "$SKIMAGE/$photo" .gpu-deps/photos/
done
du -sh .gpu-deps
