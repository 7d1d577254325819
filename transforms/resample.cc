// SPDX-License-Identifier: BSD-3-Clause
// The hot loops (uint8 x int32 multiply-adds over rows) vectorise only with
// GCC's full cost model, which -O2 (the RelWithDebInfo default) lacks; the
// integer arithmetic is unchanged, so results stay bit-exact.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "transforms/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "transforms/resample_kernels.h"

namespace ringloader::transforms {
namespace {

struct Filter {
  double (*weight)(double);
  double support;
};

double bilinear_weight(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic_weight(double x) {
  constexpr double a = -0.5;  // Pillow's bicubic, as in Keys (1981)
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

Coefficients precompute(int in_size, int out_size, const Filter& filter) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter.support * filter_scale;
  Coefficients c;
  c.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<size_t>(out_size) * c.taps, 0);
  std::vector<double> k(c.taps);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double inverse = 1.0 / filter_scale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double total = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = filter.weight((x + xmin - center + 0.5) * inverse);
      total += k[x];
    }
    for (int x = 0; x < xmax; ++x) {
      double w = total != 0.0 ? k[x] / total : k[x];
      c.weights[static_cast<size_t>(xx) * c.taps + x] = static_cast<int32_t>(
          w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

template <int kChannels>
void horizontal_pass(const ImageView& in, int row_begin, int rows,
                     const Coefficients& c, Image& out) {
  const int out_width = static_cast<int>(c.first.size());
  for (int y = 0; y < rows; ++y) {
    const uint8_t* source = in.origin + (row_begin + y) * in.row_stride;
    uint8_t* target = out.row(y);
    for (int xx = 0; xx < out_width; ++xx) {
      const int32_t* k = &c.weights[static_cast<size_t>(xx) * c.taps];
      const uint8_t* pixel = source + c.first[xx] * kChannels;
      int32_t sum[kChannels];
      for (int ch = 0; ch < kChannels; ++ch) sum[ch] = 1 << (kPrecisionBits - 1);
      for (int x = 0; x < c.count[xx]; ++x) {
        for (int ch = 0; ch < kChannels; ++ch) sum[ch] += pixel[x * kChannels + ch] * k[x];
      }
      for (int ch = 0; ch < kChannels; ++ch) target[xx * kChannels + ch] = clip8(sum[ch]);
    }
  }
}

// Rows of `in` are relative to the first row the coefficients name.
void vertical_pass(const ImageView& in, int first_row, const Coefficients& c,
                   Image& out) {
  if (vertical_pass_avx2(in, first_row, c, out)) return;
  const int out_height = static_cast<int>(c.first.size());
  const int row_values = in.width * in.channels;
  std::vector<int32_t> sums(row_values);
  for (int yy = 0; yy < out_height; ++yy) {
    const int32_t* k = &c.weights[static_cast<size_t>(yy) * c.taps];
    std::fill(sums.begin(), sums.end(), 1 << (kPrecisionBits - 1));
    for (int y = 0; y < c.count[yy]; ++y) {
      const uint8_t* source = in.origin + (c.first[yy] - first_row + y) * in.row_stride;
      const int32_t weight = k[y];
      for (int i = 0; i < row_values; ++i) sums[i] += source[i] * weight;
    }
    uint8_t* target = out.row(yy);
    for (int i = 0; i < row_values; ++i) target[i] = clip8(sums[i]);
  }
}

void horizontal(const ImageView& in, int row_begin, int rows,
                const Coefficients& c, Image& out) {
  if (horizontal_pass_avx2(in, row_begin, rows, c, out)) return;
  switch (in.channels) {
    case 1: return horizontal_pass<1>(in, row_begin, rows, c, out);
    case 3: return horizontal_pass<3>(in, row_begin, rows, c, out);
    default: return horizontal_pass<4>(in, row_begin, rows, c, out);
  }
}

// Pillow's nearest path (ImagingScaleAffine): the source coordinate starts
// at scale / 2 and accumulates `scale` per pixel, in doubles. Accumulating
// (not multiplying) matters: 64 -> 24 picks column 11, not 12, at x = 4.
std::vector<int> nearest_indices(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  std::vector<int> indices(out_size);
  double position = scale * 0.5;
  for (int i = 0; i < out_size; ++i, position += scale) {
    indices[i] = std::min(in_size - 1, static_cast<int>(position));
  }
  return indices;
}

void nearest(const ImageView& in, int out_height, int out_width, Image& out) {
  const std::vector<int> columns = nearest_indices(in.width, out_width);
  const std::vector<int> rows = nearest_indices(in.height, out_height);
  const int channels = in.channels;
  for (int y = 0; y < out_height; ++y) {
    const int row = rows[y];
    const uint8_t* source = in.origin + row * in.row_stride;
    uint8_t* target = out.row(y);
    for (int x = 0; x < out_width; ++x) {
      std::memcpy(target + x * channels, source + columns[x] * channels, channels);
    }
  }
}

void copy_view(const ImageView& in, Image& out) {
  for (int y = 0; y < in.height; ++y) {
    std::memcpy(out.row(y), in.origin + y * in.row_stride, out.row_bytes());
  }
}

}  // namespace

void resample(const ImageView& source, int out_height, int out_width,
              Interpolation interpolation, Image& out) {
  out.reshape(out_height, out_width, source.channels);
  if (out_height == source.height && out_width == source.width) {
    copy_view(source, out);  // Pillow returns a copy for an unchanged size
    return;
  }
  if (interpolation == Interpolation::kNearest) {
    nearest(source, out_height, out_width, out);
    return;
  }
  const Filter filter = interpolation == Interpolation::kBicubic
                            ? Filter{bicubic_weight, 2.0}
                            : Filter{bilinear_weight, 1.0};
  const bool need_horizontal = out_width != source.width;
  const bool need_vertical = out_height != source.height;
  Coefficients vertical = precompute(source.height, out_height, filter);
  if (!need_horizontal) {
    vertical_pass(source, 0, vertical, out);
    return;
  }
  Coefficients horizontal_c = precompute(source.width, out_width, filter);
  // Only the rows the vertical pass will read.
  const int first_row = need_vertical ? vertical.first.front() : 0;
  const int last_row = need_vertical
                           ? vertical.first.back() + vertical.count.back()
                           : source.height;
  thread_local Image temporary;
  Image& target = need_vertical ? temporary : out;
  target.reshape(last_row - first_row, out_width, source.channels);
  horizontal(source, first_row, last_row - first_row, horizontal_c, target);
  if (need_vertical) vertical_pass(ImageView::of(target), first_row, vertical, out);
}

}  // namespace ringloader::transforms
