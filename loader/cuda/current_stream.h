// SPDX-License-Identifier: BSD-3-Clause
// The consumer's current CUDA stream: libtorch's, when it was built with
// CUDA (so batches are ordered before the user's kernels on their stream),
// else the legacy default stream.
#pragma once

#include <cuda_runtime_api.h>

namespace ringloader::cuda {

cudaStream_t current_stream(int device);
bool torch_has_cuda();

}  // namespace ringloader::cuda
