// SPDX-License-Identifier: BSD-3-Clause
// The ops of torchvision 0.14's AutoAugment family (transforms/autoaugment.py)
// and their magnitude tables: _apply_op on PIL images (apply_augment_op) and
// each policy's _augmentation_space (augmentation_space), with torch's
// float32 arithmetic where torch computes the tables.
#pragma once

#include <string>
#include <vector>

#include "transforms/affine.h"
#include "transforms/image.h"

namespace ringloader::transforms {

enum class AugmentOp {
  kIdentity, kShearX, kShearY, kTranslateX, kTranslateY, kRotate, kBrightness, kColor,
  kContrast, kSharpness, kPosterize, kSolarize, kAutoContrast, kEqualize, kInvert,
};

// torchvision's op name ("ShearX", ...) and back (nullptr-free: throws Error
// for a name the family does not have).
const char* augment_op_name(AugmentOp op);
AugmentOp augment_op_from_name(const std::string& name);

// One op with its magnitude, as _apply_op(img, op_name, magnitude,
// interpolation, fill) receives them.
struct AugmentStep {
  AugmentOp op = AugmentOp::kIdentity;
  double magnitude = 0;
};

// How geometric ops sample and fill: torchvision's interpolation and fill
// (PIL's _parse_fill: one value per channel, int()).
struct AugmentWarp {
  WarpFilter filter = WarpFilter::kNearest;
  std::vector<int> fill{0};
};

// _apply_op on a PIL image: the result is left in `image`; `scratch` is
// reused.
void apply_augment_op(const AugmentStep& step, const AugmentWarp& warp, Image& image,
                      Image& scratch);

// One entry of an _augmentation_space: the op, its magnitudes (empty: the
// op takes none, torch.tensor(0.0)), and whether they are signed.
struct AugmentSpaceEntry {
  AugmentOp op;
  std::vector<double> magnitudes;
  bool is_signed = false;
};
using AugmentSpace = std::vector<AugmentSpaceEntry>;

enum class AugmentFamily { kAutoAugment, kRandAugment, kTrivialAugmentWide, kAugMix };

// The policy's _augmentation_space(num_bins, (height, width)), in its dict
// order (the order op indices are drawn in). AugMix's holds the
// Brightness/Color/Contrast/Sharpness entries only when `all_ops`.
AugmentSpace augmentation_space(AugmentFamily family, int num_bins, int height, int width,
                                bool all_ops = true);

// torch.linspace(start, end, steps) on the CPU in float32, as torch's AVX2
// kernel computes it (each vector's base fused multiply-added, its lanes
// base + k * step rounded twice, the tail fused): bins that land on an
// integer (solarize thresholds, translations) must round as torch's do.
std::vector<double> torch_linspace(double start, double end, int steps);

}  // namespace ringloader::transforms
