// SPDX-License-Identifier: BSD-3-Clause
// Turning CUDA runtime status codes into ringloader errors.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "ringloader/errors.h"

namespace ringloader::cuda {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(std::string("ringloader: ") + what + ": " +
                cudaGetErrorString(status));
  }
}

}  // namespace ringloader::cuda
