// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/augmix.h"

#include <algorithm>
#include <vector>

#include "transforms/tensor_augment_ops.h"

namespace ringloader::transforms {

void augmix(const AugmentParams& params, const AugmentDraw& draw, Image& image,
            Image& scratch) {
  const TensorWarp warp{params.warp.filter == WarpFilter::kBilinear, params.fill};
  const size_t n = image.pixels.size();
  // mix = m[0] * batch, then mix += weight_i * chain_i, all float32.
  std::vector<float> mix(n);
  for (size_t i = 0; i < n; ++i) mix[i] = draw.beta[0] * static_cast<float>(image.pixels[i]);
  Image aug;
  for (size_t chain = 0; chain < draw.chains.size(); ++chain) {
    aug = image;
    for (const AugmentStep& step : draw.chains[chain]) {
      apply_tensor_augment_op(step, warp, aug, scratch);
    }
    const float weight = draw.weights[chain];
    for (size_t i = 0; i < n; ++i) mix[i] += weight * static_cast<float>(aug.pixels[i]);
  }
  // .to(uint8): truncation (the weights sum to 1 within rounding).
  for (size_t i = 0; i < n; ++i) {
    image.pixels[i] = static_cast<uint8_t>(std::min(std::max(mix[i], 0.0f), 255.0f));
  }
}

}  // namespace ringloader::transforms
