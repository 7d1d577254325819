# SPDX-License-Identifier: BSD-3-Clause
# `pip install .` (scikit-build-core, pyproject.toml) installs everything into
# one folder of site-packages, next to the torch it was built against:
#   ringloader/            the package, _ringloader*.so, _build_info.py
#   ringloader/lib/        libringloader.so, ringloader-worker, cmake/ringloader/
#   ringloader/include/    the C++ headers (find_package(ringloader))
#   ringloader/bin/        ringloader-shard
# RPATHs are relative ($ORIGIN) to that layout and to site-packages/torch/lib.
set(RINGLOADER_PYTHON_PACKAGE_DEFAULT OFF)
if(DEFINED SKBUILD)  # scikit-build-core sets it (to 2)
  set(RINGLOADER_PYTHON_PACKAGE_DEFAULT ON)
endif()
option(RINGLOADER_PYTHON_PACKAGE "Install as the ringloader Python package (set by pip install .)"
  ${RINGLOADER_PYTHON_PACKAGE_DEFAULT})
if(RINGLOADER_PYTHON_PACKAGE)
  set(CMAKE_INSTALL_LIBDIR ringloader/lib)
  set(CMAKE_INSTALL_INCLUDEDIR ringloader/include)
  set(CMAKE_INSTALL_BINDIR ringloader/bin)
  set(RINGLOADER_LIBRARY_RPATH "$ORIGIN;$ORIGIN/../../torch/lib")
  set(RINGLOADER_MODULE_RPATH "$ORIGIN/lib;$ORIGIN/../torch/lib")
  set(RINGLOADER_PY_INSTALL_DIR ringloader)
else()
  set(RINGLOADER_LIBRARY_RPATH "$ORIGIN")
  set(RINGLOADER_MODULE_RPATH "$ORIGIN/../../..")
  # <prefix>/lib/python3.X/dist-packages (set in python/): on Debian's
  # sys.path for /usr/local.
endif()
