// SPDX-License-Identifier: BSD-3-Clause
// Python's double arithmetic as timm writes it; round() is half to even
// (std::nearbyint in the default rounding mode).
#include "transforms/resize_keep_ratio.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "transforms/resample.h"

namespace ringloader::transforms {
namespace {

class ResizeKeepRatio final : public ImageOp {
 public:
  explicit ResizeKeepRatio(ResizeKeepRatioParams params) : params_(std::move(params)) {}
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    const auto size = keep_ratio_size(params_, in.height, in.width, rng);
    const Interpolation mode = params_.interpolation ? *params_.interpolation
                               : rng.integer(0, 1) == 0 ? Interpolation::kBilinear
                                                        : Interpolation::kBicubic;
    resample(ImageView::of(in), size[0], size[1], mode, out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    if (params_.scale_prob > 0 || params_.aspect_prob > 0 || height <= 0 || width <= 0) {
      return {0, 0};  // varies per sample (or with the image)
    }
    SampleRng unused(0, 0, 0);
    const auto size = keep_ratio_size(params_, height, width, unused);
    return {size[0], size[1]};
  }

 private:
  ResizeKeepRatioParams params_;
};

std::array<double, 2> pair(OpParams& p, const std::string& key) {
  const auto v = p.numbers(key, {2});
  if (!(v[0] > 0 && v[1] >= v[0])) p.fail(key, "must be (min, max) with 0 < min <= max");
  return {v[0], v[1]};
}

}  // namespace

std::array<int, 2> keep_ratio_size(const ResizeKeepRatioParams& p, int in_height,
                                   int in_width, SampleRng& rng) {
  const double ratio_h = static_cast<double>(in_height) / p.height;
  const double ratio_w = static_cast<double>(in_width) / p.width;
  const double ratio = std::max(ratio_h, ratio_w) * p.longest +
                       std::min(ratio_h, ratio_w) * (1. - p.longest);
  std::array<double, 2> factor{1., 1.};
  if (p.scale_prob > 0 && rng.uniform() < p.scale_prob) {
    double f = rng.uniform(p.scale_range[0], p.scale_range[1]);
    if (p.scale_area) f = 1. / std::sqrt(f);
    factor = {f, f};
  }
  if (p.aspect_prob > 0 && rng.uniform() < p.aspect_prob) {
    const double aspect = std::sqrt(std::exp(
        rng.uniform(std::log(p.aspect_range[0]), std::log(p.aspect_range[1]))));
    factor = {factor[0] / aspect, factor[1] * aspect};
  }
  auto side = [](int x, double f, double r) {
    return std::max(1, static_cast<int>(std::nearbyint(x * f / r)));
  };
  return {side(in_height, factor[0], ratio), side(in_width, factor[1], ratio)};
}

std::unique_ptr<ImageOp> make_resize_keep_ratio(OpParams& p) {
  ResizeKeepRatioParams out;
  const auto size = p.ints("size", {1, 2}, true);
  out.height = size[0];
  out.width = size.size() == 2 ? size[1] : size[0];
  out.longest = p.number("longest");
  const std::string mode = p.choice("interpolation");
  if (mode != "random") out.interpolation = interpolation_from_name(mode);
  out.scale_prob = p.number("random_scale_prob");
  out.scale_range = pair(p, "random_scale_range");
  out.scale_area = p.boolean("random_scale_area");
  out.aspect_prob = p.number("random_aspect_prob");
  out.aspect_range = pair(p, "random_aspect_range");
  return std::make_unique<ResizeKeepRatio>(std::move(out));
}

}  // namespace ringloader::transforms
