// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/tensor_stage.h"

#include <immintrin.h>

#include <cstring>

#include "transforms/resample_kernels.h"  // have_avx2

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

namespace {

// One plane's 16 bytes from the three loads (see split16).
__attribute__((target("avx2"))) __m128i gather_plane(__m128i a0, __m128i a1, __m128i a2,
                                                     __m128i m0, __m128i m1, __m128i m2,
                                                     bool reverse) {
  const __m128i v = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a0, m0), _mm_shuffle_epi8(a1, m1)),
                                 _mm_shuffle_epi8(a2, m2));
  if (!reverse) return v;
  return _mm_shuffle_epi8(v, _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
}

// 16 RGB pixels (48 bytes) into 16 R, 16 G and 16 B bytes: per plane, the
// bytes each of the three 16-byte loads holds, moved into place by pshufb
// (-1 writes 0) and or-ed. `reverse`: the 16 outputs in reverse order.
__attribute__((target("avx2"))) void split16(const uint8_t* pixels, bool reverse, uint8_t* r,
                                             uint8_t* g, uint8_t* b) {
  const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pixels));
  const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pixels + 16));
  const __m128i a2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pixels + 32));
  auto plane = [&](__m128i m0, __m128i m1, __m128i m2) {
    return gather_plane(a0, a1, a2, m0, m1, m2, reverse);
  };
  const __m128i red = plane(
      _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
      _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1),
      _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13));
  const __m128i green = plane(
      _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
      _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1),
      _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14));
  const __m128i blue = plane(
      _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
      _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1),
      _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(r), red);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(g), green);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(b), blue);
}

// One row: output x takes pixel x (or width - 1 - x when mirrored); the
// AVX2 blocks of 16, then the rest one pixel at a time.
void split_row(const uint8_t* row, int width, bool mirror, bool simd, uint8_t* __restrict r,
               uint8_t* __restrict g, uint8_t* __restrict b) {
  int x = 0;
  if (simd) {
    for (; x + 16 <= width; x += 16) {
      const int first = mirror ? width - 16 - x : x;  // the block's leftmost source pixel
      split16(row + 3 * first, mirror, r + x, g + x, b + x);
    }
  }
  for (; x < width; ++x) {
    const uint8_t* pixel = row + 3 * (mirror ? width - 1 - x : x);
    r[x] = pixel[0], g[x] = pixel[1], b[x] = pixel[2];
  }
}

}  // namespace

// PILToTensor of RGB (timm's prefetcher path): three planes, row by row.
// (The per-value loop found each value's source with a division.)
void TensorWriter::write_rgb_byte_planes(const Image& image, uint8_t* out, bool mirror) {
  const size_t plane = static_cast<size_t>(image.height) * image.width;
  const bool simd = have_avx2();
  for (int y = 0; y < image.height; ++y) {
    uint8_t* r = out + static_cast<size_t>(y) * image.width;
    split_row(image.row(y), image.width, mirror, simd, r, r + plane, r + 2 * plane);
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
  if (dtype_ == DType::kUInt8 && channels == 3) {  // PILToTensor of RGB: planes by rows
    write_rgb_byte_planes(image, static_cast<uint8_t*>(destination), mirror);
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
