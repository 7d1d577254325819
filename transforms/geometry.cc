// SPDX-License-Identifier: BSD-3-Clause
// Padding, crop boxes and output sizes: the arithmetic behind the ops,
// kept apart so tests can check it against torchvision directly.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "transforms/image_ops.h"

namespace ringloader::transforms {
namespace {

// Python's round(): half to even (std::nearbyint in the default mode).
int round_half_even(double value) { return static_cast<int>(std::nearbyint(value)); }

// numpy.pad index rules for the non-constant modes.
int source_index(int i, int size, PaddingMode mode) {
  if (size == 1) return 0;
  switch (mode) {
    case PaddingMode::kEdge:
      return std::clamp(i, 0, size - 1);
    case PaddingMode::kReflect: {
      const int period = 2 * (size - 1);
      int r = ((i % period) + period) % period;
      return r < size ? r : period - r;
    }
    case PaddingMode::kSymmetric: {
      const int period = 2 * size;
      int r = ((i % period) + period) % period;
      return r < size ? r : period - 1 - r;
    }
    default:
      return i;
  }
}

}  // namespace

void pad(const Image& in, const Padding& padding, Image& out) {
  const auto& p = padding.ltrb;
  const int height = in.height + p[1] + p[3];
  const int width = in.width + p[0] + p[2];
  const int channels = in.channels;
  out.reshape(height, width, channels);
  for (int y = 0; y < height; ++y) {
    uint8_t* target = out.row(y);
    const int sy = y - p[1];
    for (int x = 0; x < width; ++x) {
      const int sx = x - p[0];
      uint8_t* pixel = target + x * channels;
      const bool inside = sy >= 0 && sy < in.height && sx >= 0 && sx < in.width;
      if (inside || padding.mode != PaddingMode::kConstant) {
        const int ry = inside ? sy : source_index(sy, in.height, padding.mode);
        const int rx = inside ? sx : source_index(sx, in.width, padding.mode);
        std::memcpy(pixel, in.row(ry) + rx * channels, channels);
      } else {
        for (int c = 0; c < channels; ++c) {
          const int value = padding.fill.size() == 1 ? padding.fill[0] : padding.fill[c];
          pixel[c] = static_cast<uint8_t>(std::clamp(value, 0, 255));
        }
      }
    }
  }
}

Box random_resized_crop_box(int height, int width, const std::array<double, 2>& scale,
                            const std::array<double, 2>& ratio, SampleRng& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_low = std::log(ratio[0]), log_high = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(scale[0], scale[1]);
    const double aspect = std::exp(rng.uniform(log_low, log_high));
    const int w = round_half_even(std::sqrt(target_area * aspect));
    const int h = round_half_even(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int top = static_cast<int>(rng.integer(0, height - h));
      const int left = static_cast<int>(rng.integer(0, width - w));
      return {top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  const double low = std::min(ratio[0], ratio[1]), high = std::max(ratio[0], ratio[1]);
  if (in_ratio < low) {
    h = round_half_even(w / low);
  } else if (in_ratio > high) {
    w = round_half_even(h * high);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

std::pair<int, int> resized_size(int height, int width, const std::vector<int>& size,
                                 int max_size) {
  if (size.size() == 2) return {size[0], size[1]};
  if (height <= 0 || width <= 0) return {0, 0};
  const int shorter = std::min(height, width), longer = std::max(height, width);
  int new_short = size[0];
  int new_long = static_cast<int>(static_cast<double>(new_short) * longer / shorter);
  if (max_size > 0 && new_long > max_size) {
    new_short = static_cast<int>(static_cast<double>(max_size) * new_short / new_long);
    new_long = max_size;
  }
  return width <= height ? std::pair<int, int>{new_long, new_short}
                         : std::pair<int, int>{new_short, new_long};
}

}  // namespace ringloader::transforms
