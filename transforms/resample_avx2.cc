// SPDX-License-Identifier: BSD-3-Clause
// AVX2 version of Pillow's vertical resampling pass with Pillow's arithmetic
// unchanged, so the bytes equal the portable loops' (and PIL's); the
// horizontal pass is resample_horizontal_avx2.cc.
//
// The trick: a 22-bit fixed-point weight k splits exactly into
// k = high * 2^15 + low with low in [0, 2^15) and |high| <= 2^8, both fitting
// int16. _mm256_madd_epi16 then multiplies pixels by two taps' halves at
// once, and (sum(pixel * high) << 15) + sum(pixel * low) is exactly Pillow's
// int32 sum(pixel * k): the same integer, not an approximation.
//
// Compiled for AVX2 per function (target attribute) and chosen at run time,
// so the library still runs on any x86-64.
#include <immintrin.h>

#include <atomic>
#include <cstring>

#include "transforms/resample_kernels.h"

namespace ringloader::transforms {

namespace {
std::atomic<bool> simd_allowed{true};
}  // namespace

bool have_avx2() {
  static const bool available = __builtin_cpu_supports("avx2");
  return available && simd_allowed.load(std::memory_order_relaxed);
}

void allow_simd(bool allowed) { simd_allowed.store(allowed, std::memory_order_relaxed); }

namespace {

constexpr int32_t kRounding = 1 << (kPrecisionBits - 1);

int32_t low_half(int32_t k) { return k & 0x7FFF; }
int32_t high_half(int32_t k) { return k >> 15; }  // arithmetic shift
// Two taps' int16 halves in one int32: madd's (even, odd) lanes.
int32_t pair(int32_t first, int32_t second) {
  return static_cast<int32_t>((static_cast<uint32_t>(first) & 0xFFFF) |
                              (static_cast<uint32_t>(second) << 16));
}

// 16 values of each row pair: (a0, b0, a1, b1, ...) as int16.
__attribute__((target("avx2"))) void interleave(const uint8_t* a, const uint8_t* b,
                                                __m256i& first8, __m256i& next8) {
  const __m128i va = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i vb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  first8 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(va, vb));
  next8 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(va, vb));
}

__attribute__((target("avx2"))) __m256i finish_sums8(__m256i low, __m256i high) {
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(high, 15), low),
                                       _mm256_set1_epi32(kRounding));
  return _mm256_srai_epi32(sum, kPrecisionBits);
}

}  // namespace

__attribute__((target("avx2"))) bool vertical_pass_avx2(const ImageView& in, int first_row,
                                                        const Coefficients& c, Image& out) {
  if (!have_avx2()) return false;
  const int out_height = static_cast<int>(c.first.size());
  const int values = in.width * in.channels;
  thread_local std::vector<const uint8_t*> row_a, row_b;
  thread_local std::vector<int32_t> w_low, w_high;
  for (int yy = 0; yy < out_height; ++yy) {
    const int32_t* k = &c.weights[static_cast<size_t>(yy) * c.taps];
    const int count = c.count[yy];
    const int pairs = (count + 1) / 2;
    row_a.resize(pairs);
    row_b.resize(pairs);
    w_low.resize(pairs);
    w_high.resize(pairs);
    auto row = [&](int t) {
      return in.origin + (c.first[yy] - first_row + t) * in.row_stride;
    };
    for (int q = 0; q < pairs; ++q) {
      const int t = 2 * q;
      const bool odd_end = t + 1 >= count;  // pair the last tap with weight 0
      row_a[q] = row(t);
      row_b[q] = odd_end ? row(t) : row(t + 1);
      const int32_t k_b = odd_end ? 0 : k[t + 1];
      w_low[q] = pair(low_half(k[t]), low_half(k_b));
      w_high[q] = pair(high_half(k[t]), high_half(k_b));
    }
    uint8_t* target = out.row(yy);
    int i = 0;
    for (; i + 16 <= values; i += 16) {
      __m256i low0 = _mm256_setzero_si256(), low1 = low0, high0 = low0, high1 = low0;
      for (int q = 0; q < pairs; ++q) {
        __m256i x0, x1;
        interleave(row_a[q] + i, row_b[q] + i, x0, x1);
        const __m256i wl = _mm256_set1_epi32(w_low[q]);
        const __m256i wh = _mm256_set1_epi32(w_high[q]);
        low0 = _mm256_add_epi32(low0, _mm256_madd_epi16(x0, wl));
        low1 = _mm256_add_epi32(low1, _mm256_madd_epi16(x1, wl));
        high0 = _mm256_add_epi32(high0, _mm256_madd_epi16(x0, wh));
        high1 = _mm256_add_epi32(high1, _mm256_madd_epi16(x1, wh));
      }
      // packs works per 128-bit lane: restore the order before packing bytes.
      const __m256i words = _mm256_permute4x64_epi64(
          _mm256_packs_epi32(finish_sums8(low0, high0), finish_sums8(low1, high1)), 0xD8);
      const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words),
                                             _mm256_extracti128_si256(words, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(target + i), bytes);
    }
    for (; i < values; ++i) {
      int32_t sum = kRounding;
      for (int t = 0; t < count; ++t) sum += row(t)[i] * k[t];
      target[i] = clip8(sum);
    }
  }
  return true;
}

}  // namespace ringloader::transforms
