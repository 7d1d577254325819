// SPDX-License-Identifier: BSD-3-Clause
#include "loader/cuda/current_stream.h"

#include <torch/torch.h>

#if RINGLOADER_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace ringloader::cuda {

cudaStream_t current_stream(int device) {
#if RINGLOADER_TORCH_CUDA
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
#else
  (void)device;
  return cudaStreamLegacy;
#endif
}

bool torch_has_cuda() {
#if RINGLOADER_TORCH_CUDA
  return torch::cuda::is_available();
#else
  return false;
#endif
}

}  // namespace ringloader::cuda
