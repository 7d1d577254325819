// SPDX-License-Identifier: BSD-3-Clause
// Makes a device current for a scope and restores the caller's: the
// loader's CUDA calls run on the caller's thread and must not leave it on
// another GPU.
#pragma once

#include <cuda_runtime_api.h>

namespace ringloader::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cudaGetDevice(&previous_);
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace ringloader::cuda
