// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/random_erasing.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "ringloader/errors.h"

namespace ringloader::transforms {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// Standard normals by Box-Muller; 1 - uniform() keeps the log finite.
void fill_normal(SampleRng& rng, std::vector<float>& out) {
  for (size_t i = 0; i < out.size(); i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(1.0 - rng.uniform()));
    const double angle = kTwoPi * rng.uniform();
    out[i] = static_cast<float>(radius * std::cos(angle));
    if (i + 1 < out.size()) out[i + 1] = static_cast<float>(radius * std::sin(angle));
  }
}

template <typename T>
void fill_box(T* tensor, const SampleShape& shape, const ErasingBox& box,
              const std::vector<T>& per_value, bool per_pixel) {
  const size_t plane = static_cast<size_t>(shape.height) * shape.width;
  size_t next = 0;
  for (int c = 0; c < shape.channels; ++c) {
    for (int y = box.top; y < box.top + box.height; ++y) {
      T* row = tensor + c * plane + static_cast<size_t>(y) * shape.width + box.left;
      for (int x = 0; x < box.width; ++x) {
        row[x] = per_pixel ? per_value[next++] : per_value[per_value.size() == 1 ? 0 : c];
      }
    }
  }
}

}  // namespace

ErasingBox draw_erasing_box(const ErasingParams& params, int channels, int height,
                            int width, SampleRng& rng, std::vector<float>* noise) {
  ErasingBox box;
  if (!rng.bernoulli(params.p)) return box;
  const double area = static_cast<double>(height) * width;
  const float log_low = std::log(static_cast<float>(params.ratio[0]));
  const float log_high = std::log(static_cast<float>(params.ratio[1]));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area =
        area * static_cast<float>(rng.uniform(params.scale[0], params.scale[1]));
    const double aspect = std::exp(static_cast<float>(rng.uniform(log_low, log_high)));
    const double rounded_h = std::nearbyint(std::sqrt(erase_area * aspect));
    const double rounded_w = std::nearbyint(std::sqrt(erase_area / aspect));
    if (!(rounded_h < height && rounded_w < width)) continue;  // checked before the int cast
    const int h = static_cast<int>(rounded_h), w = static_cast<int>(rounded_w);
    if (params.random_value && noise) {
      noise->resize(static_cast<size_t>(channels) * (params.per_channel ? 1 : h * w));
      fill_normal(rng, *noise);
    }
    box = {true, static_cast<int>(rng.integer(0, height - h)),
           static_cast<int>(rng.integer(0, width - w)), h, w};
    return box;
  }
  return box;
}

ErasingParams erasing_params(OpParams& p, int channels) {
  ErasingParams out;
  out.p = p.number("p");
  auto scale = p.numbers("scale", {2});
  if (!(scale[0] >= 0 && scale[1] <= 1)) p.fail("scale", "must lie in [0, 1]");
  if (scale[0] > scale[1]) p.fail("scale", "must be (min, max)");
  auto ratio = p.numbers("ratio", {2});
  // float32 logs of both ends must be finite, as torch takes them.
  if (!(static_cast<float>(ratio[0]) > 0 && std::isfinite(static_cast<float>(ratio[1])))) {
    p.fail("ratio", "must be positive and finite in float32");
  }
  if (ratio[0] > ratio[1]) p.fail("ratio", "must be (min, max)");
  out.scale = {scale[0], scale[1]};
  out.ratio = {ratio[0], ratio[1]};
  if (p.has("value") && p.op().params["value"].is_string()) {
    out.per_channel = p.choice("value") == "random_per_channel";
    out.random_value = true;
  } else {
    out.value = p.numbers("value", {1, static_cast<size_t>(channels)});
  }
  p.boolean("inplace");  // slots are written in place anyway
  return out;
}

RandomErasing::RandomErasing(ErasingParams params, const SampleShape& shape,
                             std::vector<double> mean, std::vector<double> std)
    : params_(std::move(params)), shape_(shape), mean_(std::move(mean)), std_(std::move(std)) {
  // torch refuses a uint8 erase value that overflows.
  if (shape_.dtype != DType::kUInt8 || params_.random_value) return;
  for (double v : params_.value) {
    if (!int_fits_uint8(v)) {
      throw OptionError("ringloader: RandomErasing: value " + std::to_string(v) +
                        " cannot be converted to uint8 without overflow");
    }
  }
}

void RandomErasing::apply(void* tensor, SampleRng& rng) const {
  std::vector<float> noise;
  const ErasingBox box =
      draw_erasing_box(params_, shape_.channels, shape_.height, shape_.width, rng, &noise);
  if (!box.erase) return;
  if (shape_.dtype == DType::kUInt8) {
    std::vector<uint8_t> values;
    for (double v : params_.value) values.push_back(static_cast<uint8_t>(static_cast<int>(v)));
    fill_box(static_cast<uint8_t*>(tensor), shape_, box, values, false);
    return;
  }
  // The value as torch holds it (float32), then Normalize's arithmetic.
  auto normalise = [&](float v, int channel) {
    if (mean_.empty()) return v;
    return (v - static_cast<float>(mean_[channel])) / static_cast<float>(std_[channel]);
  };
  std::vector<float> values;
  if (params_.random_value) {
    values = std::move(noise);
    const size_t per_channel =
        params_.per_channel ? 1 : static_cast<size_t>(box.height) * box.width;
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = normalise(values[i], static_cast<int>(i / per_channel));
    }
  } else {
    for (int c = 0; c < shape_.channels; ++c) {
      const double v = params_.value[params_.value.size() == 1 ? 0 : c];
      values.push_back(normalise(static_cast<float>(v), c));
    }
  }
  fill_box(static_cast<float*>(tensor), shape_, box, values,
           params_.random_value && !params_.per_channel);
}

}  // namespace ringloader::transforms
