# SPDX-License-Identifier: BSD-3-Clause
# Finds torch, and what differs between the libtorch builds ringloader supports (Debian's
# 1.13 CPU build, PyPI's 2.x CUDA builds), decided once and applied to every target, so no part of the build
# silently disagrees with the libtorch it links (docs/install.md).

# pip install . needs no Torch_DIR: the torch of the Python that builds.
if(RINGLOADER_PYTHON_PACKAGE AND NOT Torch_DIR)
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c
      "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE RINGLOADER_TORCH_CMAKE_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE
    COMMAND_ERROR_IS_FATAL ANY)
  set(Torch_DIR "${RINGLOADER_TORCH_CMAKE_PREFIX}/Torch")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/ringloader_find_torch.cmake)
find_package(Torch REQUIRED)

# The C++ standard: torch 1.13 needs C++17; torch 2.x's headers use C++20
# (its imported target says so in CXX_STANDARD, which does not propagate).
get_target_property(RINGLOADER_TORCH_CXX_STANDARD torch CXX_STANDARD)
if(RINGLOADER_TORCH_CXX_STANDARD AND RINGLOADER_TORCH_CXX_STANDARD GREATER CMAKE_CXX_STANDARD)
  set(CMAKE_CXX_STANDARD ${RINGLOADER_TORCH_CXX_STANDARD})
endif()

# Our kernels (loader/cuda/*.cu) never include torch: C++17, which every
# nvcc takes (CMake 3.25 knows no C++20 flag for nvcc; torch's cuda.cmake
# would copy CMAKE_CXX_STANDARD into CMAKE_CUDA_STANDARD).
set(CMAKE_CUDA_STANDARD 17)

# libstdc++'s string ABI: every target, not only those linking torch, since
# the static parts' std::string crosses into the library's API. Torch
# announces it in TORCH_CXX_FLAGS (1.13, early 2.x); torch >= 2.7 dropped
# the old ABI and says nothing: the new one (1).
set(RINGLOADER_TORCH_CXX11_ABI 1)
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=([01])")
  set(RINGLOADER_TORCH_CXX11_ABI ${CMAKE_MATCH_1})
endif()
# Only spelled out where it differs from this compiler's default (so the
# usual build keeps its command lines, and ccache its hits).
include(CheckCXXSourceCompiles)
check_cxx_source_compiles("#include <string>
#if _GLIBCXX_USE_CXX11_ABI != ${RINGLOADER_TORCH_CXX11_ABI}
#error torch uses the other string ABI
#endif
int main() { return 0; }" RINGLOADER_DEFAULT_ABI_IS_TORCHS_${RINGLOADER_TORCH_CXX11_ABI})
if(NOT RINGLOADER_DEFAULT_ABI_IS_TORCHS_${RINGLOADER_TORCH_CXX11_ABI})
  add_compile_definitions(
    $<$<COMPILE_LANGUAGE:CXX>:_GLIBCXX_USE_CXX11_ABI=${RINGLOADER_TORCH_CXX11_ABI}>)
endif()

# Torch_VERSION comes from TorchConfigVersion.cmake (e.g. 1.13.1, 2.14.1).
message(STATUS "ringloader: torch ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX}, "
  "C++${CMAKE_CXX_STANDARD}, _GLIBCXX_USE_CXX11_ABI=${RINGLOADER_TORCH_CXX11_ABI}")

# Torch's config looks for TORCH_LIBRARY with find_library(... PATHS), which
# searches the system first: with Debian's libtorch-dev installed, a pip
# torch's configure would report /usr/lib's libtorch. What we link are the
# imported targets (from TORCH_INSTALL_PREFIX); check that they, and no
# library file of another torch, are what TORCH_LIBRARIES holds.
foreach(target torch torch_cpu c10)
  if(TARGET ${target})
    get_target_property(location ${target} LOCATION)
    if(location AND NOT location MATCHES "^${TORCH_INSTALL_PREFIX}/")
      message(FATAL_ERROR "ringloader: torch's target ${target} is ${location}, outside torch "
        "${Torch_VERSION} at ${TORCH_INSTALL_PREFIX} (cmake/ringloader_find_torch.cmake)")
    endif()
  endif()
endforeach()
foreach(entry IN LISTS TORCH_LIBRARIES)
  if(entry MATCHES "/lib(torch|c10|torch_cpu|torch_cuda|c10_cuda)\\.so" AND
     NOT entry MATCHES "^${TORCH_INSTALL_PREFIX}/")
    message(FATAL_ERROR "ringloader: TORCH_LIBRARIES names ${entry}, outside torch "
      "${Torch_VERSION} at ${TORCH_INSTALL_PREFIX}: configure with -DTorch_DIR="
      "${TORCH_INSTALL_PREFIX}/share/cmake/Torch (cmake/ringloader_find_torch.cmake)")
  endif()
endforeach()

# PyPI's CUDA torch finds its NVIDIA libraries (nccl, cudnn, ...) in
# site-packages/nvidia/*/lib through its own RPATH; ld, linking an
# executable, must find those very ones (else it took CUDA's older
# /usr/local/cuda/lib64/libnccl.so.2: undefined ncclCommGrow & co.).
# Debian's torch has no such folder.
get_filename_component(RINGLOADER_TORCH_SITE "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
file(GLOB RINGLOADER_TORCH_NVIDIA_LIBS "${RINGLOADER_TORCH_SITE}/nvidia/*/lib")
foreach(dir IN LISTS RINGLOADER_TORCH_NVIDIA_LIBS)
  add_link_options("LINKER:-rpath-link,${dir}")
endforeach()
