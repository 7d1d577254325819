// SPDX-License-Identifier: BSD-3-Clause
// Properties of the resampler beyond parity (transforms_parity_test.cc): a
// crop view resamples exactly like a copied crop (RandomResizedCrop relies
// on it), and constant images stay constant.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "transforms/resample.h"
#include "transforms/resample_kernels.h"
#include <random>

namespace ringloader::transforms {
namespace {

Image pattern(int height, int width, int channels) {
  Image image(height, width, channels);
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    image.pixels[i] = static_cast<uint8_t>((i * 37 + i / 7) & 255);
  }
  return image;
}

// `view` resampled by the AVX2 passes and by the portable loops.
void ExpectSimdGivesPortableBytes(const ImageView& view, int out_h, int out_w,
                                  Interpolation mode) {
  Image fast, portable;
  resample(view, out_h, out_w, mode, fast);
  allow_simd(false);
  resample(view, out_h, out_w, mode, portable);
  allow_simd(true);
  EXPECT_EQ(fast.pixels, portable.pixels);
}

TEST(TransformResample, CropViewEqualsCopiedCrop) {
  Image image = pattern(90, 120, 3);
  ImageView view = ImageView::of(image).crop(13, 21, 50, 61);
  Image copy(50, 61, 3);
  for (int y = 0; y < 50; ++y) {
    std::memcpy(copy.row(y), view.origin + y * view.row_stride, copy.row_bytes());
  }
  for (auto mode : {Interpolation::kNearest, Interpolation::kBilinear, Interpolation::kBicubic}) {
    for (auto [h, w] : {std::pair{24, 24}, std::pair{100, 33}, std::pair{50, 200}}) {
      Image from_view, from_copy;
      resample(view, h, w, mode, from_view);
      resample(ImageView::of(copy), h, w, mode, from_copy);
      EXPECT_EQ(from_view.pixels, from_copy.pixels) << h << "x" << w;
    }
  }
}

// The AVX2 passes compute Pillow's integer sums exactly: same bytes as the
// portable loops for noise (every value, negative bicubic lobes, clipping),
// gray and RGB, up- and downscaling, and crops that end at the row's end.
TEST(TransformResample, Avx2PassesEqualThePortableLoops) {
  if (!have_avx2()) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937 rng(5);
  int compared = 0;
  for (int channels : {1, 3}) {
    Image image(301, 257, channels);
    for (auto& p : image.pixels) p = static_cast<uint8_t>(rng() % 3 == 0 ? 255 * (rng() % 2) : rng());
    for (auto mode : {Interpolation::kBilinear, Interpolation::kBicubic}) {
      for (auto [top, left, h, w, out_h, out_w] :
           {std::array{0, 0, 301, 257, 224, 224}, std::array{17, 40, 200, 217, 224, 224},
            std::array{100, 3, 33, 45, 224, 224}, std::array{0, 0, 301, 257, 31, 17},
            std::array{5, 250, 60, 7, 64, 3}, std::array{0, 0, 2, 2, 9, 9},
            std::array{1, 1, 299, 255, 300, 256}}) {
        SCOPED_TRACE(std::to_string(channels) + " channels, " + std::to_string(h) + "x" +
                     std::to_string(w) + " -> " + std::to_string(out_h) + "x" +
                     std::to_string(out_w));
        ExpectSimdGivesPortableBytes(ImageView::of(image).crop(top, left, h, w), out_h, out_w,
                                     mode);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 28);
}

// The horizontal AVX2 pass runs every output pixel for the most tap pairs
// any pixel needs (zero weights past its own), reading past a row's end: in
// place for rows with a row below them, from a padded copy for a view's
// last row. Crops that end at the buffer's last row and column, row counts
// not a multiple of its four, and widths from 1 to heavy downscales (more
// pairs than the unrolled kernels have) give the portable bytes.
TEST(TransformResample, Avx2HorizontalPassAtTheBufferEnd) {
  if (!have_avx2()) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937 rng(8);
  Image image(97, 131, 3);
  for (auto& p : image.pixels) p = static_cast<uint8_t>(rng());
  int compared = 0;
  for (auto mode : {Interpolation::kBilinear, Interpolation::kBicubic}) {
    for (auto [top, left, h, w, out_h, out_w] :
         {std::array{0, 0, 97, 131, 97, 5}, std::array{90, 120, 7, 11, 7, 3},
          std::array{96, 0, 1, 131, 1, 2}, std::array{95, 130, 2, 1, 2, 7},
          std::array{94, 128, 3, 3, 3, 1}, std::array{1, 0, 96, 131, 13, 130},
          std::array{60, 2, 37, 129, 6, 224}, std::array{0, 0, 97, 131, 97, 7}}) {
      SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w) + " at " + std::to_string(top) +
                   "," + std::to_string(left) + " -> " + std::to_string(out_h) + "x" +
                   std::to_string(out_w));
      ExpectSimdGivesPortableBytes(ImageView::of(image).crop(top, left, h, w), out_h, out_w,
                                   mode);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 16);
}

TEST(TransformResample, ConstantImageStaysConstant) {
  Image image(40, 30, 1);
  std::fill(image.pixels.begin(), image.pixels.end(), 200);
  Image out;
  resample(ImageView::of(image), 7, 93, Interpolation::kBicubic, out);
  for (uint8_t v : out.pixels) EXPECT_EQ(v, 200);
}

}  // namespace
}  // namespace ringloader::transforms
