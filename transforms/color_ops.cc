// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/color_ops.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "transforms/color_adjust.h"

namespace ringloader::transforms {

ColorJitterDraw draw_color_jitter(const ColorJitterRanges& ranges, SampleRng& rng) {
  ColorJitterDraw draw;
  for (int i = 3; i > 0; --i) {
    const int j = static_cast<int>(rng.integer(0, i));
    std::swap(draw.order[i], draw.order[j]);
  }
  for (int fn = 0; fn < 4; ++fn) {
    if (!ranges[fn]) continue;
    const auto& range = *ranges[fn];
    draw.factors[fn] = static_cast<double>(static_cast<float>(rng.uniform(range[0], range[1])));
  }
  return draw;
}

void apply_color_jitter(const ColorJitterDraw& draw, Image& image) {
  for (int fn : draw.order) {
    if (!draw.factors[fn]) continue;
    const double factor = *draw.factors[fn];
    switch (fn) {
      case kBrightness: adjust_brightness(image, static_cast<float>(factor)); break;
      case kContrast: adjust_contrast(image, static_cast<float>(factor)); break;
      case kSaturation: adjust_saturation(image, static_cast<float>(factor)); break;
      case kHue: adjust_hue(image, factor); break;
    }
  }
}

namespace {

std::optional<std::array<double, 2>> jitter_range(OpParams& p, const std::string& key,
                                                  double centre, double low, double high) {
  std::vector<double> v = p.numbers(key, {1, 2});
  if (v.size() == 1) {
    if (v[0] < 0) p.fail(key, "must not be negative when a single number");
    if (centre == 0 && v[0] > high) p.fail(key, "must be at most 0.5");
    // clip_first_on_zero: brightness, contrast and saturation stay >= 0.
    const double first = centre == 0 ? -v[0] : std::max(centre - v[0], 0.0);
    v = {first, centre + v[0]};
  } else if (!(low <= v[0] && v[0] <= v[1] && v[1] <= high)) {
    p.fail(key, "must be (min, max) within [" + std::to_string(low) + ", " +
                    std::to_string(high) + "]");
  }
  if (v[0] == centre && v[1] == centre) return std::nullopt;
  return std::array<double, 2>{v[0], v[1]};
}

class ColorJitter final : public ImageOp {
 public:
  explicit ColorJitter(const ColorJitterRanges& ranges) : ranges_(ranges) {}
  void apply(Image& in, Image&, SampleRng& rng) const override {
    apply_color_jitter(draw_color_jitter(ranges_, rng), in);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    return {height, width};
  }

 private:
  ColorJitterRanges ranges_;
};

class Grayscale final : public ImageOp {
 public:
  // channels 0 = keep the input's count; p < 0 = always, without a draw
  // (Grayscale); otherwise one uniform decides (RandomGrayscale).
  Grayscale(int channels, double p) : channels_(channels), p_(p) {}
  void apply(Image& in, Image& out, SampleRng& rng) const override {
    if (p_ >= 0 && !rng.bernoulli(p_)) return;
    to_grayscale(in, channels_ ? channels_ : in.channels, out);
    std::swap(in, out);
  }
  std::pair<int, int> output_size(int height, int width) const override {
    return {height, width};
  }
  int output_channels(int channels) const override {
    return channels_ ? channels_ : channels;
  }

 private:
  int channels_;
  double p_;
};

}  // namespace

ColorJitterRanges color_jitter_ranges(OpParams& p) {
  const double inf = std::numeric_limits<double>::infinity();
  return {jitter_range(p, "brightness", 1.0, 0.0, inf), jitter_range(p, "contrast", 1.0, 0.0, inf),
          jitter_range(p, "saturation", 1.0, 0.0, inf), jitter_range(p, "hue", 0.0, -0.5, 0.5)};
}

std::unique_ptr<ImageOp> make_color_jitter(const ColorJitterRanges& ranges) {
  return std::make_unique<ColorJitter>(ranges);
}
std::unique_ptr<ImageOp> make_grayscale(int channels) {
  return std::make_unique<Grayscale>(channels, -1.0);
}
std::unique_ptr<ImageOp> make_random_grayscale(double p) {
  return std::make_unique<Grayscale>(0, p);
}

}  // namespace ringloader::transforms
