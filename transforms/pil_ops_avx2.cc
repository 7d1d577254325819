// SPDX-License-Identifier: BSD-3-Clause
// AVX2 for ImageEnhance's blends: Color's (color_adjust.cc) over the
// bytes, and Sharpness's (pil_ops.cc) SMOOTH 3x3 float32 sums with its
// blend, eight bytes per step, with the per-byte code's operations in its
// order (-ffp-contract=off, no "fma" target: nothing is fused), so the bytes
// are the same. Per byte, the portable loops convert to float and multiply
// and add one value at a time (Sharpness: nine of each, 1.6 ms per 224x224
// RGB image; Color: 0.4 ms); here each of those runs on eight bytes at once.
#include <immintrin.h>

#include "transforms/color_adjust.h"
#include "transforms/pil_ops.h"
#include "transforms/resample_kernels.h"

namespace ringloader::transforms {
namespace {

__attribute__((target("avx2"))) __m256 bytes_at(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// row_sum: (row[i - c] * k + row[i] * m) + row[i + c] * k.
__attribute__((target("avx2"))) __m256 row_sum8(const uint8_t* row, int c, __m256 k,
                                                __m256 m) {
  return _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(bytes_at(row - c), k),
                                     _mm256_mul_ps(bytes_at(row), m)),
                       _mm256_mul_ps(bytes_at(row + c), k));
}

// clip8 / pil_blend's clipping and truncation: <= 0 (or NaN: max_ps returns
// its second operand) gives 0, >= 255 gives 255.
__attribute__((target("avx2"))) __m256i clip_truncate(__m256 v) {
  return _mm256_cvttps_epi32(
      _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0f)));
}

}  // namespace

__attribute__((target("avx2"))) int sharpen_row_avx2(const uint8_t* above,
                                                     const uint8_t* here,
                                                     const uint8_t* below, int c, int end,
                                                     float factor, uint8_t* target) {
  int i = c;
  if (!have_avx2()) return i;
  const __m256 side = _mm256_set1_ps(1.0f / 13.0f), centre = _mm256_set1_ps(5.0f / 13.0f);
  const __m256 offset = _mm256_set1_ps(0.0f + 0.5f), alpha = _mm256_set1_ps(factor);
  // Loads reach byte i + 7 + c, inside the row while i + 8 <= end.
  for (; i + 8 <= end; i += 8) {
    __m256 ss = offset;
    ss = _mm256_add_ps(ss, row_sum8(below + i, c, side, side));
    ss = _mm256_add_ps(ss, row_sum8(here + i, c, side, centre));
    ss = _mm256_add_ps(ss, row_sum8(above + i, c, side, side));
    const __m256 smooth = _mm256_cvtepi32_ps(clip_truncate(ss));
    const __m256 original = bytes_at(here + i);
    // pil_blend(smooth, original, factor): a + alpha * (b - a), b - a exact
    const __m256 v =
        _mm256_add_ps(smooth, _mm256_mul_ps(alpha, _mm256_sub_ps(original, smooth)));
    const __m256i words = clip_truncate(v);
    const __m128i halves = _mm_packus_epi32(_mm256_castsi256_si128(words),
                                            _mm256_extracti128_si256(words, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(target + i), _mm_packus_epi16(halves, halves));
  }
  return i;
}

__attribute__((target("avx2"))) size_t pil_blend_bytes_avx2(const uint8_t* degenerate,
                                                             uint8_t* image, size_t count,
                                                             float alpha) {
  size_t i = 0;
  if (!have_avx2()) return i;
  const __m256 a = _mm256_set1_ps(alpha);
  for (; i + 8 <= count; i += 8) {
    const __m256 base = bytes_at(degenerate + i);
    // pil_blend: float(a) + alpha * float(b - a), b - a exact in float
    const __m256 v = _mm256_add_ps(base, _mm256_mul_ps(a, _mm256_sub_ps(bytes_at(image + i), base)));
    const __m256i words = clip_truncate(v);
    const __m128i halves = _mm_packus_epi32(_mm256_castsi256_si128(words),
                                            _mm256_extracti128_si256(words, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(image + i), _mm_packus_epi16(halves, halves));
  }
  return i;
}

}  // namespace ringloader::transforms
