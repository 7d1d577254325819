// SPDX-License-Identifier: BSD-3-Clause
// ImageEnhance's fast paths, AVX2 and portable, give the bytes of Pillow's
// steps as written here: Sharpness's one-pass SMOOTH + blend against
// ImagingFilter3x3 with SMOOTH into a new image then ImagingBlend; Color's
// chunked blend against the per-pixel luma and blend. The parity suites
// compare those steps with Pillow itself.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "transforms/color_adjust.h"
#include "transforms/color_convert.h"
#include "transforms/pil_ops.h"
#include "transforms/resample_kernels.h"

namespace ringloader::transforms {
namespace {

uint8_t clip(float v) { return v <= 0.0f ? 0 : v >= 255.0f ? 255 : static_cast<uint8_t>(v); }

Image two_steps(const Image& in, float factor) {
  const int c = in.channels;
  Image smooth = in;  // borders copied
  const float side = 1.0f / 13.0f, centre = 5.0f / 13.0f;
  for (int y = 1; y < in.height - 1; ++y) {
    for (int i = c; i < (in.width - 1) * c; ++i) {
      const uint8_t* rows[3] = {in.row(y + 1), in.row(y), in.row(y - 1)};
      float ss = 0.5f;
      for (int r = 0; r < 3; ++r) {
        const float m = r == 1 ? centre : side;
        ss += static_cast<float>(rows[r][i - c]) * side + static_cast<float>(rows[r][i]) * m +
              static_cast<float>(rows[r][i + c]) * side;
      }
      smooth.row(y)[i] = clip(ss);
    }
  }
  Image out = in;
  for (size_t i = 0; i < out.pixels.size(); ++i) {
    out.pixels[i] = pil_blend(smooth.pixels[i], in.pixels[i], factor);
  }
  return out;
}

TEST(SharpnessSimd, OnePassEqualsSmoothThenBlend) {
  std::mt19937 rng(45);
  int compared = 0;
  for (int channels : {1, 3}) {
    for (auto [h, w] : {std::pair{224, 224}, std::pair{3, 3}, std::pair{9, 4}, std::pair{17, 29}}) {
      Image in(h, w, channels);
      for (auto& p : in.pixels) p = static_cast<uint8_t>(rng() % 3 == 0 ? 255 * (rng() % 2) : rng());
      // AutoAugment's factors (1 + m, m in [-0.99, 0.99]), extrapolation
      // beyond, and 0 (the smoothed image).
      for (float factor : {0.0f, 0.01f, 0.37f, 1.5f, 1.99f, 3.7f, -2.0f}) {
        SCOPED_TRACE(std::to_string(channels) + " channels " + std::to_string(h) + "x" +
                     std::to_string(w) + " factor " + std::to_string(factor));
        const Image expected = two_steps(in, factor);
        for (bool simd : {true, false}) {
          allow_simd(simd);
          Image image = in, scratch;
          adjust_sharpness(image, scratch, factor);
          allow_simd(true);
          ASSERT_EQ(image.pixels, expected.pixels) << "simd " << simd;
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 2 * 4 * 7 * 2);
}

// Past one chunk of 2048 pixels, with a tail that is not a multiple of 8
// bytes; factors of AutoAugment's Color (1 + m, m in [-0.9, 0.9]) and
// beyond, and 0 (the gray image).
TEST(ColorSimd, ChunkedBlendEqualsPerPixel) {
  std::mt19937 rng(46);
  int compared = 0;
  for (auto [h, w] : {std::pair{224, 224}, std::pair{1, 1}, std::pair{3, 5}, std::pair{61, 37}}) {
    Image in(h, w, 3);
    for (auto& p : in.pixels) p = static_cast<uint8_t>(rng() % 3 == 0 ? 255 * (rng() % 2) : rng());
    for (float factor : {0.0f, 0.1f, 0.55f, 1.9f, 3.3f, -1.5f}) {
      Image expected = in;
      for (size_t i = 0; i < expected.pixels.size(); i += 3) {
        uint8_t* p = &expected.pixels[i];
        const int gray = luma(p[0], p[1], p[2]);
        for (int c = 0; c < 3; ++c) p[c] = pil_blend(gray, p[c], factor);
      }
      for (bool simd : {true, false}) {
        allow_simd(simd);
        Image image = in;
        adjust_saturation(image, factor);
        allow_simd(true);
        ASSERT_EQ(image.pixels, expected.pixels) << h << "x" << w << " factor " << factor
                                                 << " simd " << simd;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 4 * 6 * 2);
}

}  // namespace
}  // namespace ringloader::transforms
