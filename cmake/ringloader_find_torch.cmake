# SPDX-License-Identifier: BSD-3-Clause
# Finds the torch of Torch_DIR and no other. TorchConfig.cmake looks for
# some of its libraries with find_library(... PATHS <its lib>), which
# searches the system first: with Debian's libtorch-dev installed, a pip
# torch's configure linked /usr/lib's libc10.so (and reported /usr/lib's
# libtorch.so), and torch 1.13's libtorch_cpu (below). So those are found here first, in Torch_DIR's lib/ only.
# Used by ringloader's build (cmake/torch_compat.cmake) and installed for
# find_package(ringloader) (cmake/ringloaderConfig.cmake.in).
# A CUDA torch's Caffe2 config picks nvcc flags for torch's own extension
# builds, and without TORCH_CUDA_ARCH_LIST it runs a GPU probe that fails on
# a machine without one (and under CMP0104). ringloader's kernels take
# CMAKE_CUDA_ARCHITECTURES instead; this only satisfies torch's config.
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "7.5;8.0;8.6;8.9;9.0")
endif()
if(Torch_DIR)
  # TorchConfig.cmake's find_dependency(Caffe2 PATHS ...) likewise found
  # Debian's Caffe2Config.cmake (/usr/lib/x86_64-linux-gnu/cmake/Caffe2)
  # first, whose imported torch_cpu / c10 targets are torch 1.13's.
  get_filename_component(Caffe2_DIR "${Torch_DIR}/../Caffe2" ABSOLUTE)
  set(Caffe2_DIR "${Caffe2_DIR}" CACHE PATH "Caffe2 config of Torch_DIR's torch" FORCE)
  get_filename_component(_ringloader_torch_lib "${Torch_DIR}/../../../lib" ABSOLUTE)
  foreach(_ringloader_name torch c10 kineto)
    find_library(${_ringloader_name}_LIBRARY ${_ringloader_name}
      PATHS "${_ringloader_torch_lib}" NO_DEFAULT_PATH)
  endforeach()
  set(TORCH_LIBRARY ${torch_LIBRARY} CACHE FILEPATH "libtorch of Torch_DIR")
endif()
