// SPDX-License-Identifier: BSD-3-Clause
// The last step of every pipeline, fused: ToTensor (/255, CHW), Normalize
// and PILToTensor, writing each value once, straight into the ring slot.
#pragma once

#include <array>
#include <vector>

#include "ringloader/transforms.h"
#include "transforms/image.h"

namespace ringloader::transforms {

// How uint8 values become float32: ToTensor's (and ConvertImageDtype's)
// x / 255, transforms.v2 ToDtype(scale=True)'s x * float(1 / 255) (126 of
// the 256 values differ from x / 255 by one ulp), or ToDtype(scale=False)'s x.
enum class ByteScale { kDivide, kReciprocal, kNone };

class TensorWriter {
 public:
  // dtype/layout from the pipeline's tensor op; mean/std empty unless
  // Normalize follows ToTensor.
  TensorWriter(DType dtype, Layout layout, int channels,
               const std::vector<double>& mean, const std::vector<double>& std,
               ByteScale scale = ByteScale::kDivide);
  // `mirror`: write the image flipped left to right (a fused
  // RandomHorizontalFlip), in the same single pass.
  void write(const Image& image, void* destination, bool mirror = false) const;

 private:
  void write_rgb_planes(const Image& image, float* out, bool mirror) const;
  static void write_rgb_byte_planes(const Image& image, uint8_t* out, bool mirror);
  DType dtype_;
  Layout layout_;
  // Per channel, the float for each byte value: computed with torchvision's
  // own float32 operations ((x / 255 - mean) / std), so identical to it.
  std::vector<std::array<float, 256>> lookup_;
};

}  // namespace ringloader::transforms
