// SPDX-License-Identifier: BSD-3-Clause
// AVX2 versions of Pillow's two resampling passes with Pillow's arithmetic
// unchanged, so the bytes equal the portable loops' (and PIL's).
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

// Per output pixel, per group of 4 taps: the pair words of taps (0,1) and
// (2,3), low halves then high halves. Taps past count weigh 0.
struct PairedWeights {
  int groups = 0;                // per output pixel
  std::vector<int32_t> words;    // out_size * groups * 4
  const int32_t* at(int out, int group) const {
    return &words[(static_cast<size_t>(out) * groups + group) * 4];
  }
};

void pair_weights(const Coefficients& c, PairedWeights& p) {
  const int out_size = static_cast<int>(c.first.size());
  p.groups = (c.taps + 3) / 4;
  p.words.assign(static_cast<size_t>(out_size) * p.groups * 4, 0);
  for (int xx = 0; xx < out_size; ++xx) {
    const int32_t* k = &c.weights[static_cast<size_t>(xx) * c.taps];
    auto tap = [&](int t) { return t < c.count[xx] ? k[t] : 0; };
    for (int g = 0; g < p.groups; ++g) {
      int32_t* w = &p.words[(static_cast<size_t>(xx) * p.groups + g) * 4];
      const int t = 4 * g;
      w[0] = pair(low_half(tap(t)), low_half(tap(t + 1)));
      w[1] = pair(low_half(tap(t + 2)), low_half(tap(t + 3)));
      w[2] = pair(high_half(tap(t)), high_half(tap(t + 1)));
      w[3] = pair(high_half(tap(t + 2)), high_half(tap(t + 3)));
    }
  }
}

template <int kChannels>
void horizontal_pixel_scalar(const uint8_t* pixel, const int32_t* k, int count,
                             uint8_t* target) {
  int32_t sum[kChannels];
  for (int ch = 0; ch < kChannels; ++ch) sum[ch] = kRounding;
  for (int x = 0; x < count; ++x) {
    for (int ch = 0; ch < kChannels; ++ch) sum[ch] += pixel[x * kChannels + ch] * k[x];
  }
  for (int ch = 0; ch < kChannels; ++ch) target[ch] = clip8(sum[ch]);
}

// A byte shuffle that turns 2 RGB pixels (8 loaded bytes) into int16 pairs
// (channel c of pixel 0, channel c of pixel 1), in both 128-bit lanes (one
// row each); -1 bytes are zero.
__attribute__((target("avx2"))) __m256i rgb_pairs_shuffle() {
  return _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,  //
                          0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
}

// Two rows at once (one per 128-bit lane), two taps per multiply: the
// weights are set up once per output pixel for both rows, and the final
// shift and pack is shared.
template <int kChannels>
__attribute__((target("avx2"))) void horizontal_two_rows(
    const uint8_t* source0, const uint8_t* source1, uint8_t* target0, uint8_t* target1,
    int row_bytes, const Coefficients& c, const PairedWeights& p) {
  const int out_width = static_cast<int>(c.first.size());
  const __m256i shuffle = rgb_pairs_shuffle();
  for (int xx = 0; xx < out_width; ++xx) {
    const int first = c.first[xx];
    const int count = c.count[xx];
    const int pairs = (count + 1) / 2;
    // The last pair's 8-byte load must stay inside the row.
    if ((first + 2 * (pairs - 1)) * kChannels + 8 > row_bytes) {
      const int32_t* k = &c.weights[static_cast<size_t>(xx) * c.taps];
      horizontal_pixel_scalar<kChannels>(source0 + first * kChannels, k, count,
                                         target0 + xx * kChannels);
      horizontal_pixel_scalar<kChannels>(source1 + first * kChannels, k, count,
                                         target1 + xx * kChannels);
      continue;
    }
    __m256i low = _mm256_setzero_si256(), high = _mm256_setzero_si256();
    for (int q = 0; q < pairs; ++q) {
      const size_t offset = static_cast<size_t>(first + 2 * q) * kChannels;
      const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(source0 + offset));
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(source1 + offset));
      const __m256i pixels = _mm256_shuffle_epi8(_mm256_set_m128i(b, a), shuffle);
      const int32_t* w = p.at(xx, q / 2);
      low = _mm256_add_epi32(low, _mm256_madd_epi16(pixels, _mm256_set1_epi32(w[q % 2])));
      high = _mm256_add_epi32(high,
                              _mm256_madd_epi16(pixels, _mm256_set1_epi32(w[2 + q % 2])));
    }
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(high, 15), low),
                                   _mm256_set1_epi32(kRounding));
    sum = _mm256_srai_epi32(sum, kPrecisionBits);
    const __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(sum, sum), sum);
    const int32_t row0 = _mm256_cvtsi256_si32(bytes);
    const int32_t row1 = _mm_cvtsi128_si32(_mm256_extracti128_si256(bytes, 1));
    std::memcpy(target0 + xx * kChannels, &row0, kChannels);
    std::memcpy(target1 + xx * kChannels, &row1, kChannels);
  }
}

template <int kChannels>
void horizontal_rows(const ImageView& in, int row_begin, int rows, const Coefficients& c,
                     const PairedWeights& p, Image& out) {
  const int row_bytes = in.width * kChannels;
  for (int y = 0; y < rows; y += 2) {
    const int y1 = y + 1 < rows ? y + 1 : y;  // an odd last row pairs with itself
    horizontal_two_rows<kChannels>(in.origin + (row_begin + y) * in.row_stride,
                                   in.origin + (row_begin + y1) * in.row_stride,
                                   out.row(y), out.row(y1), row_bytes, c, p);
  }
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

bool horizontal_pass_avx2(const ImageView& in, int row_begin, int rows,
                          const Coefficients& c, Image& out) {
  if (!have_avx2() || in.channels != 3) return false;
  thread_local PairedWeights paired;
  pair_weights(c, paired);
  horizontal_rows<3>(in, row_begin, rows, c, paired, out);
  return true;
}

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
