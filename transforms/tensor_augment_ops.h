// SPDX-License-Identifier: BSD-3-Clause
// _apply_op on uint8 tensors (torchvision 0.14's functional_tensor), which
// AugMix uses even for PIL images: float32 blends truncated back to uint8,
// affine warps through an affine grid and grid_sample (align_corners=False,
// zero padding, the fill mixed in through a mask channel), rounded. Where
// torch's kernels fix an order of float32 operations (grid_sample's AVX2
// path) it is followed; reductions whose order torch leaves to its
// backends (bmm, conv2d, mean) can move a value by one level, no more.
#pragma once

#include <vector>

#include "transforms/augment_ops.h"
#include "transforms/image.h"

namespace ringloader::transforms {

// `bilinear` false: nearest. `fill` empty: torchvision's None (zeros, no
// mask); otherwise one value or one per channel.
struct TensorWarp {
  bool bilinear = true;
  std::vector<double> fill;
};

void apply_tensor_augment_op(const AugmentStep& step, const TensorWarp& warp, Image& image,
                             Image& scratch);

}  // namespace ringloader::transforms
