# SPDX-License-Identifier: BSD-3-Clause
# The extension against the torch that Python3_EXECUTABLE imports (included
# by python/CMakeLists.txt; expects RINGLOADER_PY_NATIVE_SOURCES and
# RINGLOADER_PY_OUT). Every way the two torches could disagree stops the
# configure here rather than corrupting at run time.
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c
    "import torch; print(torch.__version__); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
  OUTPUT_VARIABLE RINGLOADER_PY_TORCH OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE RINGLOADER_PY_TORCH_STATUS)
if(NOT RINGLOADER_PY_TORCH_STATUS EQUAL 0)
  message(FATAL_ERROR "ringloader: ${Python3_EXECUTABLE} cannot import torch")
endif()
string(REPLACE "\n" ";" RINGLOADER_PY_TORCH "${RINGLOADER_PY_TORCH}")
list(GET RINGLOADER_PY_TORCH 0 RINGLOADER_BUILT_TORCH_VERSION)
list(GET RINGLOADER_PY_TORCH 1 RINGLOADER_PY_TORCH_ABI)

# The same torch for the C++ headers (Torch_DIR) and for Python: compare
# major.minor.patch (Debian's Python says 1.13.0a0, its CMake 1.13.0; pip's
# 2.14.1+cu130 and 2.14.1).
string(REGEX MATCH "^[0-9]+\\.[0-9]+\\.[0-9]+" RINGLOADER_PY_TORCH_BASE
  "${RINGLOADER_BUILT_TORCH_VERSION}")
string(REGEX MATCH "^[0-9]+\\.[0-9]+\\.[0-9]+" RINGLOADER_CMAKE_TORCH_BASE "${Torch_VERSION}")
if(NOT RINGLOADER_PY_TORCH_BASE STREQUAL RINGLOADER_CMAKE_TORCH_BASE)
  message(FATAL_ERROR "ringloader: Torch_DIR is torch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}) "
    "but ${Python3_EXECUTABLE} imports torch ${RINGLOADER_BUILT_TORCH_VERSION}: point "
    "Torch_DIR at that Python's torch: -DTorch_DIR=$(python -c 'import torch; "
    "print(torch.utils.cmake_prefix_path)')/Torch")
endif()
if(NOT RINGLOADER_PY_TORCH_ABI STREQUAL RINGLOADER_TORCH_CXX11_ABI)
  message(FATAL_ERROR "ringloader: torch's Python says _GLIBCXX_USE_CXX11_ABI="
    "${RINGLOADER_PY_TORCH_ABI}, its CMake files ${RINGLOADER_TORCH_CXX11_ABI}")
endif()

# pybind11: the copy torch ships in its own include/ (PyPI's torch 2.x) is the
# version torch's bindings are built with, and it is already on the torch
# target's include path, where a second copy would mix headers. Debian's
# torch has none of its own: it is built with Debian's pybind11-dev.
if(EXISTS "${TORCH_INSTALL_PREFIX}/include/pybind11/pybind11.h"
   AND NOT TORCH_INSTALL_PREFIX STREQUAL "/usr")
  set(RINGLOADER_PYBIND11 "torch's own (${TORCH_INSTALL_PREFIX}/include/pybind11)")
  Python3_add_library(_ringloader MODULE WITH_SOABI ${RINGLOADER_PY_NATIVE_SOURCES})
  set_target_properties(_ringloader PROPERTIES CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
else()
  find_package(Python3 COMPONENTS Development REQUIRED)
  find_package(pybind11 CONFIG REQUIRED)
  set(RINGLOADER_PYBIND11 "pybind11 ${pybind11_VERSION} (${pybind11_INCLUDE_DIR})")
  pybind11_add_module(_ringloader MODULE ${RINGLOADER_PY_NATIVE_SOURCES})
endif()
message(STATUS "ringloader: Python ${Python3_VERSION} with torch ${RINGLOADER_BUILT_TORCH_VERSION}, "
  "pybind11: ${RINGLOADER_PYBIND11}")

# The version the package checks at import (python/native/build_info.py.in),
# and the extension again at its own init (torch_compat.cc).
set_source_files_properties(native/torch_compat.cc PROPERTIES COMPILE_DEFINITIONS
  "RINGLOADER_BUILT_TORCH_VERSION=\"${RINGLOADER_BUILT_TORCH_VERSION}\"")
set(RINGLOADER_CUDA_FLAG 0)
if(RINGLOADER_CUDA AND RINGLOADER_TORCH_CUDA)
  set(RINGLOADER_CUDA_FLAG 1)
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/native/build_info.py.in
  ${RINGLOADER_PY_OUT}/_build_info.py @ONLY)
