// Properties of the resampler beyond parity (transforms_parity_test.cc): a
// crop view resamples exactly like a copied crop (RandomResizedCrop relies
// on it), and constant images stay constant.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "transforms/resample.h"

namespace ringloader::transforms {
namespace {

Image pattern(int height, int width, int channels) {
  Image image(height, width, channels);
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    image.pixels[i] = static_cast<uint8_t>((i * 37 + i / 7) & 255);
  }
  return image;
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

TEST(TransformResample, ConstantImageStaysConstant) {
  Image image(40, 30, 1);
  std::fill(image.pixels.begin(), image.pixels.end(), 200);
  Image out;
  resample(ImageView::of(image), 7, 93, Interpolation::kBicubic, out);
  for (uint8_t v : out.pixels) EXPECT_EQ(v, 200);
}

}  // namespace
}  // namespace ringloader::transforms
