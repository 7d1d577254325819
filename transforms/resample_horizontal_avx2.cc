// SPDX-License-Identifier: BSD-3-Clause
// Pillow's horizontal resampling pass on RGB rows in AVX2, four rows at a
// time, with Pillow's integer sums unchanged (the weight-splitting trick of
// resample_avx2.cc: k = high * 2^15 + low, both halves int16, so madd
// computes the exact int32 sum).
//
// Why it is shaped this way (it was 13% of timm's training pipeline): per
// output pixel, every row uses the same weights and the same source
// offset, so four rows share the weight broadcasts and the loop; every
// output pixel runs the same number of tap pairs (the most any pixel needs,
// padded with zero weights), a constant the loop is unrolled for, so there
// is no per-pixel bounds check or remainder. The padding taps may read a
// few bytes past a row's end: in place that is the next row of the same
// image (times a zero weight); the view's last row, which has no next row
// in the buffer, is copied into a padded buffer first. A pixel's result is
// stored as a 4-byte word whose fourth byte the next pixel overwrites.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "transforms/resample_kernels.h"

namespace ringloader::transforms {
namespace {

constexpr int kRows = 4;
constexpr int32_t kRounding = 1 << (kPrecisionBits - 1);

// Per output pixel: the byte offset of its first tap, and per tap pair the
// (low halves, high halves) words madd multiplies by.
struct HorizontalPlan {
  int pairs = 0;
  std::vector<int32_t> offsets;  // out_width
  std::vector<int32_t> words;    // out_width * pairs * 2
  int reach = 0;                 // bytes read from a row's start, at most
};

int32_t pair_words(int32_t first, int32_t second) {
  return static_cast<int32_t>((static_cast<uint32_t>(first) & 0xFFFF) |
                              (static_cast<uint32_t>(second) << 16));
}

void make_plan(const Coefficients& c, HorizontalPlan& plan) {
  const int out_width = static_cast<int>(c.first.size());
  const int most = *std::max_element(c.count.begin(), c.count.end());
  plan.pairs = (most + 1) / 2;
  plan.offsets.resize(out_width);
  plan.words.assign(static_cast<size_t>(out_width) * plan.pairs * 2, 0);
  plan.reach = 0;
  for (int xx = 0; xx < out_width; ++xx) {
    const int32_t* k = &c.weights[static_cast<size_t>(xx) * c.taps];
    auto tap = [&](int t) { return t < c.count[xx] ? k[t] : 0; };
    plan.offsets[xx] = c.first[xx] * 3;
    int32_t* w = &plan.words[static_cast<size_t>(xx) * plan.pairs * 2];
    for (int q = 0; q < plan.pairs; ++q) {
      w[2 * q] = pair_words(tap(2 * q) & 0x7FFF, tap(2 * q + 1) & 0x7FFF);
      w[2 * q + 1] = pair_words(tap(2 * q) >> 15, tap(2 * q + 1) >> 15);
    }
    // The last pair's 8-byte load.
    plan.reach = std::max(plan.reach, plan.offsets[xx] + 6 * (plan.pairs - 1) + 8);
  }
}

// Two RGB pixels (8 loaded bytes) as int16 pairs (channel c of pixel 0,
// channel c of pixel 1) in each 128-bit lane; the fourth pair is zero.
__attribute__((target("avx2"))) __m256i rgb_pairs_shuffle() {
  return _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,  //
                          0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
}

__attribute__((target("avx2"))) __m256i two_rows(const uint8_t* a, const uint8_t* b,
                                                 __m256i shuffle) {
  const __m128i low = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a));
  const __m128i high = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
  return _mm256_shuffle_epi8(_mm256_set_m128i(high, low), shuffle);
}

__attribute__((target("avx2"))) __m256i finish(__m256i low, __m256i high) {
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(high, 15), low),
                                       _mm256_set1_epi32(kRounding));
  return _mm256_srai_epi32(sum, kPrecisionBits);
}

// Constant sizes: a variable memcpy size compiles to a byte loop.
void store_pixel(uint8_t* target, int32_t word, bool last) {
  if (last) {
    std::memcpy(target, &word, 3);
  } else {
    std::memcpy(target, &word, 4);  // byte 4: the next pixel's, rewritten
  }
}

// kPairs > 0: that many pairs, unrolled; 0: plan.pairs, a loop.
template <int kPairs>
__attribute__((target("avx2"))) void four_rows(const uint8_t* const source[kRows],
                                               uint8_t* const target[kRows],
                                               const HorizontalPlan& plan) {
  const int pairs = kPairs > 0 ? kPairs : plan.pairs;
  const int out_width = static_cast<int>(plan.offsets.size());
  const __m256i shuffle = rgb_pairs_shuffle();
  // Locals: the byte stores below may alias anything, so the compiler would
  // reload every pointer it reads through memory after each of them.
  const uint8_t* const s0 = source[0];
  const uint8_t* const s1 = source[1];
  const uint8_t* const s2 = source[2];
  const uint8_t* const s3 = source[3];
  uint8_t* const t0 = target[0];
  uint8_t* const t1 = target[1];
  uint8_t* const t2 = target[2];
  uint8_t* const t3 = target[3];
  const int32_t* const offsets = plan.offsets.data();
  const int32_t* const all_words = plan.words.data();
  for (int xx = 0; xx < out_width; ++xx) {
    const int32_t* w = all_words + static_cast<size_t>(xx) * pairs * 2;
    const size_t offset = static_cast<size_t>(offsets[xx]);
    __m256i low01 = _mm256_setzero_si256(), high01 = low01, low23 = low01, high23 = low01;
    for (int q = 0; q < pairs; ++q) {
      const size_t at = offset + 6 * static_cast<size_t>(q);
      const __m256i rows01 = two_rows(s0 + at, s1 + at, shuffle);
      const __m256i rows23 = two_rows(s2 + at, s3 + at, shuffle);
      const __m256i weight_low = _mm256_set1_epi32(w[2 * q]);
      const __m256i weight_high = _mm256_set1_epi32(w[2 * q + 1]);
      low01 = _mm256_add_epi32(low01, _mm256_madd_epi16(rows01, weight_low));
      high01 = _mm256_add_epi32(high01, _mm256_madd_epi16(rows01, weight_high));
      low23 = _mm256_add_epi32(low23, _mm256_madd_epi16(rows23, weight_low));
      high23 = _mm256_add_epi32(high23, _mm256_madd_epi16(rows23, weight_high));
    }
    // Lane 0 holds rows 0 and 2, lane 1 rows 1 and 3, four bytes each.
    const __m256i words = _mm256_packs_epi32(finish(low01, high01), finish(low23, high23));
    const __m256i bytes = _mm256_packus_epi16(words, words);
    const bool last = xx == out_width - 1;
    const size_t at = static_cast<size_t>(xx) * 3;
    store_pixel(t0 + at, _mm256_extract_epi32(bytes, 0), last);
    store_pixel(t2 + at, _mm256_extract_epi32(bytes, 1), last);
    store_pixel(t1 + at, _mm256_extract_epi32(bytes, 4), last);
    store_pixel(t3 + at, _mm256_extract_epi32(bytes, 5), last);
  }
}

using FourRows = void (*)(const uint8_t* const[kRows], uint8_t* const[kRows],
                          const HorizontalPlan&);

FourRows kernel_for(int pairs) {
  switch (pairs) {
    case 1: return four_rows<1>;
    case 2: return four_rows<2>;
    case 3: return four_rows<3>;
    case 4: return four_rows<4>;
    case 5: return four_rows<5>;
    case 6: return four_rows<6>;
    default: return four_rows<0>;
  }
}

}  // namespace

bool horizontal_pass_avx2(const ImageView& in, int row_begin, int rows,
                          const Coefficients& c, Image& out) {
  if (!have_avx2() || in.channels != 3 || c.first.empty()) return false;
  thread_local HorizontalPlan plan;
  make_plan(c, plan);
  const FourRows kernel = kernel_for(plan.pairs);
  const int row_bytes = in.width * 3;
  // A row read in place must leave `reach` bytes readable: its own, then
  // the next row of the buffer (there is one below every view row but the
  // last). Otherwise it is read from a zero-padded copy.
  const bool reach_fits = plan.reach <= row_bytes ||
                          plan.reach <= static_cast<int>(in.row_stride) + row_bytes;
  thread_local std::vector<uint8_t> padded[kRows];
  for (int y = 0; y < rows; y += kRows) {
    const uint8_t* source[kRows];
    uint8_t* target[kRows];
    for (int k = 0; k < kRows; ++k) {
      const int r = std::min(y + k, rows - 1);  // short groups repeat the last row
      const uint8_t* row = in.origin + static_cast<size_t>(row_begin + r) * in.row_stride;
      if (plan.reach > row_bytes && (!reach_fits || row_begin + r + 1 >= in.height)) {
        padded[k].assign(static_cast<size_t>(plan.reach), 0);
        std::memcpy(padded[k].data(), row, static_cast<size_t>(row_bytes));
        row = padded[k].data();
      }
      source[k] = row;
      target[k] = out.row(r);
    }
    kernel(source, target, plan);
  }
  return true;
}

}  // namespace ringloader::transforms
