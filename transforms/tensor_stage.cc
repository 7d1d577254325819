// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/tensor_stage.h"

#include <cstring>

namespace ringloader::transforms {

TensorWriter::TensorWriter(DType dtype, Layout layout, int channels,
                           const std::vector<double>& mean,
                           const std::vector<double>& std, ByteScale scale)
    : dtype_(dtype), layout_(layout) {
  if (dtype != DType::kFloat32) return;
  lookup_.resize(channels);
  for (int c = 0; c < channels; ++c) {
    const float m = mean.empty() ? 0.0f : static_cast<float>(mean[c]);
    const float s = std.empty() ? 1.0f : static_cast<float>(std[c]);
    for (int v = 0; v < 256; ++v) {
      float x = static_cast<float>(v);
      if (scale == ByteScale::kDivide) x /= 255.0f;
      if (scale == ByteScale::kReciprocal) x *= static_cast<float>(1.0 / 255);
      lookup_[c][v] = mean.empty() ? x : (x - m) / s;
    }
  }
}

void TensorWriter::write_rgb_planes(const Image& image, float* out, bool mirror) const {
  const int width = image.width;
  const size_t plane = static_cast<size_t>(image.height) * width;
  const float* r_table = lookup_[0].data();
  const float* g_table = lookup_[1].data();
  const float* b_table = lookup_[2].data();
  for (int y = 0; y < image.height; ++y) {
    const uint8_t* row = image.row(y);
    const size_t base = static_cast<size_t>(y) * width;
    float* r = out + base;
    float* g = r + plane;
    float* b = g + plane;
    for (int x = 0; x < width; ++x) {
      const uint8_t* pixel = row + 3 * (mirror ? width - 1 - x : x);
      r[x] = r_table[pixel[0]];
      g[x] = g_table[pixel[1]];
      b[x] = b_table[pixel[2]];
    }
  }
}

void TensorWriter::write(const Image& image, void* destination, bool mirror) const {
  const int channels = image.channels;
  const int width = image.width;
  const size_t plane = static_cast<size_t>(image.height) * width;
  const uint8_t* pixels = image.pixels.data();
  // Index of the source pixel for output pixel i (row-major).
  auto source_of = [&](size_t i) {
    if (!mirror) return i;
    const size_t x = i % width;
    return i - x + (width - 1 - x);
  };
  if (dtype_ == DType::kUInt8 && layout_ == Layout::kHWC) {
    if (!mirror) {
      std::memcpy(destination, pixels, plane * channels);
      return;
    }
    auto* out = static_cast<uint8_t*>(destination);
    for (size_t i = 0; i < plane; ++i) {
      std::memcpy(out + i * channels, pixels + source_of(i) * channels, channels);
    }
    return;
  }
  if (dtype_ == DType::kUInt8) {
    auto* out = static_cast<uint8_t*>(destination);
    for (int c = 0; c < channels; ++c) {
      for (size_t i = 0; i < plane; ++i) out[c * plane + i] = pixels[source_of(i) * channels + c];
    }
    return;
  }
  auto* out = static_cast<float*>(destination);
  if (channels == 3) {  // the common case: one pass, three planes at once
    write_rgb_planes(image, out, mirror);
    return;
  }
  for (int c = 0; c < channels; ++c) {
    const float* table = lookup_[c].data();
    float* target = out + c * plane;
    const uint8_t* source = pixels + c;
    if (!mirror) {
      for (size_t i = 0; i < plane; ++i) target[i] = table[source[i * channels]];
      continue;
    }
    for (int y = 0; y < image.height; ++y) {  // rows read backwards
      const uint8_t* row_end = source + (static_cast<size_t>(y) * width + width - 1) * channels;
      float* row = target + static_cast<size_t>(y) * width;
      for (int x = 0; x < width; ++x) row[x] = table[row_end[-x * channels]];
    }
  }
}

}  // namespace ringloader::transforms
