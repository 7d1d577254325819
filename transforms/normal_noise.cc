// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/normal_noise.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "base/philox.h"
#include "transforms/resample_kernels.h"  // have_avx2, shared with the other kernels

namespace ringloader::transforms {
namespace {

constexpr int kGroupBlocks = 8;                   // blocks per group (one AVX2 vector)
constexpr int kGroupValues = 4 * kGroupBlocks;    // values per group
constexpr float kTwoToMinus24 = 5.9604644775390625e-08f;
constexpr float kHalfPi = 1.57079632679489661923f;
constexpr float kSqrtHalf = 0.707106781186547524f;
// Cephes logf: log(1 + m) = m - m^2 / 2 + m^3 * P(m), and ln 2 split in two.
constexpr float kLogP[9] = {7.0376836292E-2f,  -1.1514610310E-1f, 1.1676998740E-1f,
                            -1.2420140846E-1f, 1.4249322787E-1f,  -1.6668057665E-1f,
                            2.0000714765E-1f,  -2.4999993993E-1f, 3.3333331174E-1f};
constexpr float kLn2Low = -2.12194440e-4f, kLn2High = 0.693359375f;
// Cephes sinf / cosf kernels on [-pi/4, pi/4].
constexpr float kSinP[3] = {-1.9515295891E-4f, 8.3321608736E-3f, -1.6666654611E-1f};
constexpr float kCosP[3] = {2.443315711809948E-5f, -1.388731625493765E-3f,
                            4.166664568298827E-2f};
constexpr uint32_t kPhilox0 = 0xD2511F53u, kPhilox1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

float uniform24(uint32_t word) { return static_cast<float>(word >> 8) * kTwoToMinus24; }

// log(x) for x in [2^-24, 1] (normal floats).
float log_kernel(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  float exponent = static_cast<float>(static_cast<int>((bits >> 23) & 0xFF) - 126);
  bits = (bits & 0x807FFFFFu) | 0x3F000000u;  // x = m * 2^exponent, m in [0.5, 1)
  float m;
  std::memcpy(&m, &bits, sizeof m);
  if (m < kSqrtHalf) {
    exponent = exponent - 1.0f;
    m = (m + m) - 1.0f;
  } else {
    m = m - 1.0f;
  }
  const float z = m * m;
  float y = kLogP[0];
  for (int i = 1; i < 9; ++i) y = y * m + kLogP[i];
  y = (y * m) * z;
  y = y + kLn2Low * exponent;
  y = y - 0.5f * z;
  return (m + y) + kLn2High * exponent;
}

}  // namespace

void box_muller_pair(uint32_t w1, uint32_t w2, float& cos_value, float& sin_value) {
  const float radius = std::sqrt(-2.0f * log_kernel(1.0f - uniform24(w1)));
  // The angle 2 pi u2 in quarter turns: t = 4 u2 (exact), nearest quadrant
  // q, the rest f = t - q (exact) in [-1/2, 1/2] quarter turns.
  const float t = uniform24(w2) * 4.0f;
  const float q = std::nearbyint(t);
  const float x = (t - q) * kHalfPi;
  const float z = x * x;
  float s = kSinP[0], c = kCosP[0];
  for (int i = 1; i < 3; ++i) {
    s = s * z + kSinP[i];
    c = c * z + kCosP[i];
  }
  s = (s * z) * x + x;
  c = ((c * z) * z - 0.5f * z) + 1.0f;
  // (cos, sin)(q pi / 2 + x): rotate by q quarter turns.
  switch (static_cast<int>(q) & 3) {
    case 0: cos_value = c, sin_value = s; break;
    case 1: cos_value = -s, sin_value = c; break;
    case 2: cos_value = -c, sin_value = -s; break;
    default: cos_value = s, sin_value = -c; break;
  }
  cos_value = radius * cos_value;
  sin_value = radius * sin_value;
}

namespace {

void group_portable(std::array<uint32_t, 2> key, uint32_t group, float* out) {
  for (int lane = 0; lane < kGroupBlocks; ++lane) {
    const auto w = base::philox4x32_10({group * kGroupBlocks + lane, 0, 0, 0}, key);
    box_muller_pair(w[0], w[1], out[lane], out[8 + lane]);
    box_muller_pair(w[2], w[3], out[16 + lane], out[24 + lane]);
  }
}

// --- AVX2: the same arithmetic on 8 blocks (lanes) at once ---------------

// 32 x 32 -> 64-bit products of every lane with `m`: low and high words.
__attribute__((target("avx2"))) void multiply_wide(__m256i a, uint32_t m, __m256i& low,
                                                   __m256i& high) {
  const __m256i factor = _mm256_set1_epi32(static_cast<int>(m));
  const __m256i even = _mm256_mul_epu32(a, factor);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), factor);
  low = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  high = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

__attribute__((target("avx2"))) void philox8(std::array<uint32_t, 2> key, uint32_t group,
                                             __m256i w[4]) {
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(group * kGroupBlocks)),
                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i c1 = _mm256_setzero_si256(), c2 = c1, c3 = c1;
  for (int round = 0; round < 10; ++round) {
    __m256i low0, high0, low1, high1;
    multiply_wide(c0, kPhilox0, low0, high0);
    multiply_wide(c2, kPhilox1, low1, high1);
    const __m256i k0 = _mm256_set1_epi32(static_cast<int>(key[0]));
    const __m256i k1 = _mm256_set1_epi32(static_cast<int>(key[1]));
    c0 = _mm256_xor_si256(_mm256_xor_si256(high1, c1), k0);
    c1 = low1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(high0, c3), k1);
    c3 = low0;
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  w[0] = c0, w[1] = c1, w[2] = c2, w[3] = c3;
}

__attribute__((target("avx2"))) __m256 uniform24_8(__m256i word) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(word, 8)),
                       _mm256_set1_ps(kTwoToMinus24));
}

__attribute__((target("avx2"))) __m256 poly8(__m256 y, __m256 x, float k) {
  return _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(k));
}

__attribute__((target("avx2"))) __m256 log_kernel8(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  __m256 exponent = _mm256_cvtepi32_ps(_mm256_sub_epi32(
      _mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xFF)),
      _mm256_set1_epi32(126)));
  __m256 m = _mm256_castsi256_ps(_mm256_or_si256(
      _mm256_and_si256(bits, _mm256_set1_epi32(static_cast<int>(0x807FFFFFu))),
      _mm256_set1_epi32(0x3F000000)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 small = _mm256_cmp_ps(m, _mm256_set1_ps(kSqrtHalf), _CMP_LT_OQ);
  exponent = _mm256_blendv_ps(exponent, _mm256_sub_ps(exponent, one), small);
  m = _mm256_blendv_ps(_mm256_sub_ps(m, one), _mm256_sub_ps(_mm256_add_ps(m, m), one), small);
  const __m256 z = _mm256_mul_ps(m, m);
  __m256 y = _mm256_set1_ps(kLogP[0]);
  for (int i = 1; i < 9; ++i) y = poly8(y, m, kLogP[i]);
  y = _mm256_mul_ps(_mm256_mul_ps(y, m), z);
  y = _mm256_add_ps(y, _mm256_mul_ps(_mm256_set1_ps(kLn2Low), exponent));
  y = _mm256_sub_ps(y, _mm256_mul_ps(_mm256_set1_ps(0.5f), z));
  return _mm256_add_ps(_mm256_add_ps(m, y),
                       _mm256_mul_ps(_mm256_set1_ps(kLn2High), exponent));
}

__attribute__((target("avx2"))) void box_muller8(__m256i w1, __m256i w2, float* cos_out,
                                                 float* sin_out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(
      _mm256_set1_ps(-2.0f), log_kernel8(_mm256_sub_ps(one, uniform24_8(w1)))));
  const __m256 t = _mm256_mul_ps(uniform24_8(w2), _mm256_set1_ps(4.0f));
  const __m256 q = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 x = _mm256_mul_ps(_mm256_sub_ps(t, q), _mm256_set1_ps(kHalfPi));
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 s = _mm256_set1_ps(kSinP[0]), c = _mm256_set1_ps(kCosP[0]);
  for (int i = 1; i < 3; ++i) {
    s = poly8(s, z, kSinP[i]);
    c = poly8(c, z, kCosP[i]);
  }
  s = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(s, z), x), x);
  c = _mm256_add_ps(_mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(c, z), z),
                                  _mm256_mul_ps(_mm256_set1_ps(0.5f), z)),
                    one);
  // Quadrant n: odd swaps (c, s); cos is negated for n = 1, 2, sin for 2, 3.
  const __m256i n = _mm256_and_si256(_mm256_cvtps_epi32(q), _mm256_set1_epi32(3));
  const __m256 swap = _mm256_castsi256_ps(
      _mm256_cmpeq_epi32(_mm256_and_si256(n, _mm256_set1_epi32(1)), _mm256_set1_epi32(1)));
  const __m256 first = _mm256_blendv_ps(c, s, swap), second = _mm256_blendv_ps(s, c, swap);
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i n_plus_1 = _mm256_add_epi32(n, _mm256_set1_epi32(1));
  // bit 1 of n + 1 is set for n = 1, 2; bit 1 of n for n = 2, 3: moved to the sign.
  const __m256 cos_sign = _mm256_castsi256_ps(
      _mm256_and_si256(_mm256_slli_epi32(n_plus_1, 30), sign));
  const __m256 sin_sign = _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(n, 30), sign));
  _mm256_storeu_ps(cos_out, _mm256_mul_ps(radius, _mm256_xor_ps(first, cos_sign)));
  _mm256_storeu_ps(sin_out, _mm256_mul_ps(radius, _mm256_xor_ps(second, sin_sign)));
}

__attribute__((target("avx2"))) void group_avx2(std::array<uint32_t, 2> key, uint32_t group,
                                                float* out) {
  __m256i w[4];
  philox8(key, group, w);
  box_muller8(w[0], w[1], out, out + 8);
  box_muller8(w[2], w[3], out + 16, out + 24);
}

}  // namespace

void standard_normals(uint64_t key, float* out, size_t count) {
  const std::array<uint32_t, 2> words = {static_cast<uint32_t>(key),
                                         static_cast<uint32_t>(key >> 32)};
  const bool simd = have_avx2();
  auto group = [&](uint32_t g, float* target) {
    simd ? group_avx2(words, g, target) : group_portable(words, g, target);
  };
  const size_t whole = count / kGroupValues;
  for (size_t g = 0; g < whole; ++g) group(static_cast<uint32_t>(g), out + g * kGroupValues);
  if (count % kGroupValues == 0) return;
  float last[kGroupValues];
  group(static_cast<uint32_t>(whole), last);
  std::copy(last, last + count % kGroupValues, out + whole * kGroupValues);
}

}  // namespace ringloader::transforms
