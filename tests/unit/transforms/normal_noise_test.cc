// SPDX-License-Identifier: BSD-3-Clause
// RandomErasing's noise (transforms/normal_noise.h): the AVX2 path gives the
// bytes of the portable one; the portable one is the stream the header
// defines (Philox blocks in groups of 8, Box-Muller per pair of words) and
// its float32 polynomials stay within 2e-6 of libm's log, cos and sin; the
// values are standard normal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/philox.h"
#include "transforms/normal_noise.h"
#include "transforms/resample_kernels.h"

namespace ringloader::transforms {
namespace {

std::vector<float> normals(uint64_t key, size_t count, bool simd) {
  allow_simd(simd);
  std::vector<float> out(count);
  standard_normals(key, out.data(), count);
  allow_simd(true);
  return out;
}

TEST(NormalNoise, Avx2GivesThePortableBytes) {
  if (!have_avx2()) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937_64 keys(11);
  // Whole groups, tails, one value, and a box a third of 224 x 224 x 3.
  for (size_t count : {size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{1000},
                       size_t{50176}}) {
    for (int k = 0; k < 4; ++k) {
      const uint64_t key = keys();
      const std::vector<float> simd = normals(key, count, true);
      const std::vector<float> portable = normals(key, count, false);
      ASSERT_EQ(std::memcmp(simd.data(), portable.data(), count * sizeof(float)), 0)
          << count << " values, key " << key;
    }
  }
}

// Every word pair's edge cases through both paths: u1 = 0 (radius 0) and
// the largest (the deepest tail), each quadrant and its boundaries.
TEST(NormalNoise, Avx2GivesThePortableBytesAtTheEdges) {
  if (!have_avx2()) GTEST_SKIP() << "this CPU has no AVX2";
  std::vector<float> a(1 << 16), b(1 << 16);
  for (int simd = 0; simd < 2; ++simd) {
    allow_simd(simd == 1);
    standard_normals(0, (simd ? a : b).data(), a.size());
  }
  allow_simd(true);
  ASSERT_EQ(a, b);
}

TEST(NormalNoise, PortableIsTheDefinedStream) {
  const uint64_t key = 0x0123456789ABCDEFull;
  const std::vector<float> out = normals(key, 64, false);
  for (uint32_t block = 0; block < 16; ++block) {
    const auto w = base::philox4x32_10({block, 0, 0, 0},
                                       {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
    const size_t group = block / 8 * 32, lane = block % 8;
    float c, s;
    box_muller_pair(w[0], w[1], c, s);
    EXPECT_EQ(out[group + lane], c);
    EXPECT_EQ(out[group + 8 + lane], s);
    box_muller_pair(w[2], w[3], c, s);
    EXPECT_EQ(out[group + 16 + lane], c);
    EXPECT_EQ(out[group + 24 + lane], s);
  }
}

TEST(NormalNoise, PolynomialsMatchLibm) {
  double worst = 0;
  // u2 across its 2^24 values at one u1: the angle's kernels; then u1
  // across its range at u2 = 0 (cos 1, sin 0): the radius.
  for (uint32_t u2 = 0; u2 < (1u << 24); u2 += 7) {
    float c, s;
    const uint32_t w1 = 0x9B4C5A00u;  // some u1 in (0, 1)
    box_muller_pair(w1, u2 << 8, c, s);
    const double u1 = (w1 >> 8) / 16777216.0;
    const double radius = std::sqrt(-2.0 * std::log(1.0 - u1));
    const double angle = 2 * M_PI * (u2 / 16777216.0);
    worst = std::max({worst, std::fabs(c - radius * std::cos(angle)),
                      std::fabs(s - radius * std::sin(angle))});
  }
  for (uint32_t u1 = 0; u1 < (1u << 24); u1 += 5) {
    float c, s;
    box_muller_pair(u1 << 8, 0, c, s);
    const double radius = std::sqrt(-2.0 * std::log(1.0 - u1 / 16777216.0));
    worst = std::max(worst, std::fabs(c - radius) / std::max(1.0, radius));
    ASSERT_EQ(s, 0.0f);
  }
  EXPECT_LT(worst, 2e-6);
}

TEST(NormalNoise, ValuesAreStandardNormal) {
  const std::vector<float> out = normals(42, 1 << 20, have_avx2());
  double sum = 0, squares = 0, fourth = 0;
  std::vector<int> bins(8);  // quantiles of N(0, 1) at -1.15, -0.67, -0.32, 0, ...
  const double edges[7] = {-1.1503, -0.6745, -0.3186, 0.0, 0.3186, 0.6745, 1.1503};
  for (float v : out) {
    sum += v;
    squares += double{v} * v;
    fourth += double{v} * v * v * v;
    ++bins[std::upper_bound(edges, edges + 7, v) - edges];
  }
  const double n = static_cast<double>(out.size());
  EXPECT_NEAR(sum / n, 0.0, 0.005);
  EXPECT_NEAR(squares / n, 1.0, 0.005);
  EXPECT_NEAR(fourth / n, 3.0, 0.05);
  double chi_square = 0;
  for (int count : bins) chi_square += (count - n / 8) * (count - n / 8) / (n / 8);
  EXPECT_LT(chi_square, 24.3);  // 7 degrees of freedom, p = 0.001
}

}  // namespace
}  // namespace ringloader::transforms
