// SPDX-License-Identifier: BSD-3-Clause
// The fast paths of the affine warps give the bytes of the per-pixel loops
// (which the parity suites compare with Pillow): the AVX2 bilinear and
// bicubic kernels on four pixels at once, and the whole-pixel shift that
// TranslateX/Y take.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "transforms/affine.h"
#include "transforms/affine_kernels.h"
#include "transforms/resample_kernels.h"

namespace ringloader::transforms {
namespace {

Image noise(int height, int width, int channels, std::mt19937& rng) {
  Image image(height, width, channels);
  // Extremes often: they are where bicubic overshoots and clips.
  for (auto& p : image.pixels) p = static_cast<uint8_t>(rng() % 3 == 0 ? 255 * (rng() % 2) : rng());
  return image;
}

// The loop affine_warp ran before the fast paths, pixel by pixel.
Image reference(const Image& in, int height, int width, const AffineMatrix& m, WarpFilter filter,
                int fill) {
  Image out(height, width, in.channels);
  std::fill(out.pixels.begin(), out.pixels.end(), static_cast<uint8_t>(fill));
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const SourcePoint p = source_point(m, x, y);
      if (!inside(p, in)) continue;
      uint8_t* target = out.row(y) + x * in.channels;
      if (filter == WarpFilter::kBilinear) {
        bilinear_pixel(in, p, target);
      } else {
        bicubic_pixel(in, p, target);
      }
    }
  }
  return out;
}

std::vector<AffineMatrix> matrices(int height, int width, std::mt19937& rng) {
  std::vector<AffineMatrix> out;
  std::uniform_real_distribution<double> angle(-180.0, 180.0), shear(-45.0, 45.0);
  std::uniform_real_distribution<double> scale(0.3, 3.0), shift(-40.0, 40.0);
  const std::array<double, 2> centre{width * 0.5, height * 0.5};
  for (int i = 0; i < 12; ++i) {
    out.push_back(inverse_affine_matrix(centre, angle(rng), {shift(rng), shift(rng)},
                                        scale(rng), {shear(rng), shear(rng)}));
  }
  // AutoAugment's shears (about the corner), a rotation, a half-pixel
  // shift, a mirror, a point far outside and a NaN.
  out.push_back(inverse_affine_matrix({0, 0}, 0, {0, 0}, 1, {std::atan(0.3) * 57.29577951308232, 0}));
  out.push_back(inverse_affine_matrix({0, 0}, 0, {0, 0}, 1, {0, std::atan(-0.3) * 57.29577951308232}));
  out.push_back(inverse_affine_matrix(centre, 30.0, {0, 0}, 1, {0, 0}));
  out.push_back({1, 0, 0.5, 0, 1, -0.5});
  // One coordinate's fraction 0 everywhere (the kernels skip that axis's
  // interpolation), the other's not.
  out.push_back({1, 0.3, 0.5, -0.0, 1, 2});
  out.push_back({1, 0, -3, 0.2, 1, 0.25});
  out.push_back({-1, 0, static_cast<double>(width), 0, 1, 0});
  out.push_back({1, 0, 1e12, 0, 1, 0});
  out.push_back({1, 0, NAN, 0, 1, 0});
  return out;
}

TEST(AffineSimd, Avx2KernelsEqualThePerPixelLoops) {
  if (!have_avx2()) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937 rng(43);
  int compared = 0;
  for (int channels : {1, 3}) {
    // Odd sizes (a tail after the last four pixels), tiny ones (gathers
    // near the buffer's end everywhere) and a 224 crop.
    for (auto [h, w] : {std::pair{224, 224}, std::pair{37, 61}, std::pair{5, 3}, std::pair{1, 2},
                        std::pair{2, 1}}) {
      const Image in = noise(h, w, channels, rng);
      for (const AffineMatrix& m : matrices(h, w, rng)) {
        for (WarpFilter filter : {WarpFilter::kBilinear, WarpFilter::kBicubic}) {
          for (auto [out_h, out_w] : {std::pair{h, w}, std::pair{h + 3, w + 5}}) {
            SCOPED_TRACE(std::to_string(channels) + " channels " + std::to_string(h) + "x" +
                         std::to_string(w) + " filter " + std::to_string(static_cast<int>(filter)) +
                         " matrix " + std::to_string(m[0]) + "," + std::to_string(m[1]) + "," +
                         std::to_string(m[2]));
            const Image expected = reference(in, out_h, out_w, m, filter, 7);
            Image fast;
            affine_warp(in, out_h, out_w, m, filter, {7}, fast);
            ASSERT_EQ(fast.pixels, expected.pixels);
            allow_simd(false);
            Image portable;
            affine_warp(in, out_h, out_w, m, filter, {7}, portable);
            allow_simd(true);
            ASSERT_EQ(portable.pixels, expected.pixels);
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 2 * 5 * 21 * 2 * 2);
}

// TranslateX/Y's matrices (F.affine about the centre, int() translations)
// move by whole pixels: the shift copy gives every filter's bytes.
TEST(AffineSimd, WholePixelShiftEqualsEveryFilter) {
  std::mt19937 rng(44);
  for (int channels : {1, 3}) {
    const Image in = noise(31, 46, channels, rng);
    for (double tx : {-50.0, -13.0, 0.0, 7.0, 45.0}) {
      for (double ty : {-31.0, -2.0, 0.0, 30.0}) {
        const AffineMatrix m = inverse_affine_matrix({23.0, 15.5}, 0.0, {tx, ty}, 1.0, {0.0, 0.0});
        ASSERT_EQ(m[2], -tx);
        ASSERT_EQ(m[5], -ty);
        for (WarpFilter filter : {WarpFilter::kBilinear, WarpFilter::kBicubic}) {
          Image out;
          affine_warp(in, 31, 46, m, filter, {0, 9, 200}, out);
          Image expected(31, 46, channels);
          for (int y = 0; y < 31; ++y) {
            for (int x = 0; x < 46; ++x) {
              for (int c = 0; c < channels; ++c) {
                const int sx = x - static_cast<int>(tx), sy = y - static_cast<int>(ty);
                const bool in_image = sx >= 0 && sx < 46 && sy >= 0 && sy < 31;
                expected.row(y)[x * channels + c] =
                    in_image ? in.row(sy)[sx * channels + c] : (channels == 1 ? 0 : (c == 0 ? 0 : c == 1 ? 9 : 200));
              }
            }
          }
          const Image reference_loop = reference(in, 31, 46, m, filter, 0);
          ASSERT_EQ(out.pixels, expected.pixels) << tx << " " << ty;
          if (channels == 1) ASSERT_EQ(out.pixels, reference_loop.pixels) << tx << " " << ty;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringloader::transforms
