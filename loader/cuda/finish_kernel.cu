// SPDX-License-Identifier: BSD-3-Clause
#include "loader/cuda/finish_kernel.h"

namespace ringloader::cuda {
namespace {

// One thread per output element; reads are coalesced for CHW input and
// strided by channels for HWC (small: 1 or 3), writes always coalesced.
__global__ void finish(const uint8_t* __restrict__ input,
                       float* __restrict__ output, FinishParams params,
                       int64_t total) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const int64_t plane = static_cast<int64_t>(params.height) * params.width;
  const int64_t per_sample = plane * params.channels;
  const int64_t sample = i / per_sample;
  const int64_t within = i % per_sample;
  const int c = static_cast<int>(within / plane);
  const int64_t pixel = within % plane;
  const int64_t source = params.input_hwc
                             ? sample * per_sample + pixel * params.channels + c
                             : i;
  // (x / 255 - mean) / std, folded into one multiply-add: the same as
  // ToTensor + Normalize up to float rounding (~1e-7 relative).
  output[i] = input[source] * params.scale[c] + params.offset[c];
}

}  // namespace

void launch_finish(const uint8_t* input, float* output,
                   const FinishParams& params, cudaStream_t stream) {
  const int64_t total = params.samples * params.channels *
                        static_cast<int64_t>(params.height) * params.width;
  if (total == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  finish<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      input, output, params, total);
}

}  // namespace ringloader::cuda
