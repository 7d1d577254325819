// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/random_erasing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "ringloader/errors.h"
#include "transforms/normal_noise.h"

namespace ringloader::transforms {
namespace {

// One value, or one per channel, over the box.
template <typename T>
void fill_box(T* tensor, const SampleShape& shape, const ErasingBox& box,
              const std::vector<T>& per_value) {
  const size_t plane = static_cast<size_t>(shape.height) * shape.width;
  for (int c = 0; c < shape.channels; ++c) {
    const T value = per_value[per_value.size() == 1 ? 0 : c];
    for (int y = box.top; y < box.top + box.height; ++y) {
      T* row = tensor + c * plane + static_cast<size_t>(y) * shape.width + box.left;
      std::fill(row, row + box.width, value);
    }
  }
}

// Per-pixel values (CHW order over the box) copied row by row.
void copy_rows(float* tensor, const SampleShape& shape, const ErasingBox& box,
               const float* values) {
  const size_t plane = static_cast<size_t>(shape.height) * shape.width;
  for (int c = 0; c < shape.channels; ++c) {
    for (int y = box.top; y < box.top + box.height; ++y) {
      std::memcpy(tensor + c * plane + static_cast<size_t>(y) * shape.width + box.left, values,
                  sizeof(float) * box.width);
      values += box.width;
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
    if (params.random_value) {
      // One draw names the noise's own stream (normal_noise.h), so the box's
      // place below is drawn the same however many values the noise has.
      const uint64_t key = rng.next_u64();
      if (noise) {
        noise->resize(static_cast<size_t>(channels) * (params.per_channel ? 1 : h * w));
        standard_normals(key, noise->data(), noise->size());
      }
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
  thread_local std::vector<float> noise;  // reused: up to a third of the image
  const ErasingBox box =
      draw_erasing_box(params_, shape_.channels, shape_.height, shape_.width, rng, &noise);
  if (!box.erase) return;
  if (shape_.dtype == DType::kUInt8) {
    std::vector<uint8_t> values;
    for (double v : params_.value) values.push_back(static_cast<uint8_t>(static_cast<int>(v)));
    fill_box(static_cast<uint8_t*>(tensor), shape_, box, values);
    return;
  }
  std::vector<float> values;
  if (params_.random_value) {
    const size_t per_channel =
        params_.per_channel ? 1 : static_cast<size_t>(box.height) * box.width;
    for (int c = 0; c < shape_.channels; ++c) {
      normalise(noise.data() + c * per_channel, per_channel, c);
    }
    if (!params_.per_channel) {
      copy_rows(static_cast<float*>(tensor), shape_, box, noise.data());
      return;
    }
    values = noise;
  } else {
    for (int c = 0; c < shape_.channels; ++c) {
      values.push_back(static_cast<float>(params_.value[params_.value.size() == 1 ? 0 : c]));
      normalise(&values.back(), 1, c);
    }
  }
  fill_box(static_cast<float*>(tensor), shape_, box, values);
}

// The value as torch holds it (float32), then Normalize's arithmetic, when
// a Normalize follows.
void RandomErasing::normalise(float* values, size_t count, int channel) const {
  if (mean_.empty()) return;
  const float mean = static_cast<float>(mean_[channel]);
  const float std = static_cast<float>(std_[channel]);
  for (size_t i = 0; i < count; ++i) values[i] = (values[i] - mean) / std;
}

}  // namespace ringloader::transforms
