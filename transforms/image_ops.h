// SPDX-License-Identifier: BSD-3-Clause
// The image ops, each torchvision's algorithm on 8-bit HWC images (PIL
// backend, torchvision 0.14). Random choices draw from the sample's
// SampleRng in a fixed order, documented per op, with torchvision's rules.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "transforms/compiled_pipeline.h"
#include "transforms/resample.h"

namespace ringloader::transforms {

// Padding (left, top, right, bottom) and how to fill it, like F.pad.
using ringloader::PaddingMode;  // the public enum (transforms.h)
struct Padding {
  std::array<int, 4> ltrb{};
  PaddingMode mode = PaddingMode::kConstant;
  std::vector<int> fill{0};  // one value, or one per channel
  bool any() const { return ltrb[0] || ltrb[1] || ltrb[2] || ltrb[3]; }
};
void pad(const Image& in, const Padding& padding, Image& out);

// RandomResizedCrop.get_params: 10 tries, then the ratio-clamped centre.
// Draws per try: uniform(scale), uniform(log ratio); then top, left.
Box random_resized_crop_box(int height, int width, const std::array<double, 2>& scale,
                            const std::array<double, 2>& ratio, SampleRng& rng);
// torchvision's Resize output size for [size] (shorter side) or [h, w];
// {0, 0} for [size] when the input size is not known (not positive).
std::pair<int, int> resized_size(int height, int width, const std::vector<int>& size,
                                 int max_size);

std::unique_ptr<ImageOp> make_resize(std::vector<int> size, Interpolation interpolation,
                                     int max_size);
std::unique_ptr<ImageOp> make_center_crop(int height, int width);
std::unique_ptr<ImageOp> make_random_crop(int height, int width, Padding padding,
                                          bool pad_if_needed);
// `interpolation` empty: bilinear or bicubic drawn per sample after the box
// (timm's RandomResizedCropAndInterpolation(interpolation='random')).
std::unique_ptr<ImageOp> make_random_resized_crop(int height, int width,
                                                  std::array<double, 2> scale,
                                                  std::array<double, 2> ratio,
                                                  std::optional<Interpolation> interpolation);
std::unique_ptr<ImageOp> make_flip(bool horizontal, double p);
std::unique_ptr<ImageOp> make_pad(Padding padding);

}  // namespace ringloader::transforms
