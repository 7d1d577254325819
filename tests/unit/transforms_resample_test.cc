// Properties of the resampler that the Python parity suite does not reach:
// a crop view resamples exactly like a copied crop (RandomResizedCrop relies
// on it), and decode errors name the file and the reason.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ringloader/errors.h"
#include "transforms/decode.h"
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

std::string decode_error(const std::vector<uint8_t>& bytes, int64_t max_pixels = 1 << 30) {
  Image out;
  try {
    decode_image(bytes.data(), bytes.size(), ColorMode::kRGB, "x/bad.img", out,
                 DecodeLimits{max_pixels});
  } catch (const DecodeError& error) {
    return error.what();
  }
  return "";
}

TEST(TransformDecode, ErrorsNameTheFileAndTheReason) {
  EXPECT_NE(decode_error({}).find("x/bad.img: empty file"), std::string::npos);
  EXPECT_NE(decode_error({'h', 'e', 'l', 'l', 'o'}).find("unsupported"), std::string::npos);
  std::vector<uint8_t> png_header = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0};
  EXPECT_NE(decode_error(png_header).find("corrupt"), std::string::npos);
  std::vector<uint8_t> jpeg_start = {0xff, 0xd8, 0xff, 0xe0, 0, 16};
  EXPECT_NE(decode_error(jpeg_start).find("x/bad.img"), std::string::npos);
  // A BMP header claiming 100000 x 100000 pixels: refused before allocating.
  std::vector<uint8_t> bomb(54, 0);
  bomb[0] = 'B'; bomb[1] = 'M';
  bomb[10] = 54; bomb[14] = 40;
  bomb[18] = 0xa0; bomb[19] = 0x86; bomb[20] = 0x01;  // width 100000
  bomb[22] = 0xa0; bomb[23] = 0x86; bomb[24] = 0x01;  // height 100000
  bomb[26] = 1; bomb[28] = 24;
  std::string message = decode_error(bomb, 1000000);
  EXPECT_NE(message.find("exceeds the limit"), std::string::npos) << message;
}

TEST(TransformDecode, EveryTruncationOfAPngIsAnErrorNotACrash) {
  // A tiny valid PNG (2x1 RGB), cut at every length.
  const std::vector<uint8_t> png = {
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48,
      0x44, 0x52, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00,
      0x00, 0x7b, 0x40, 0xe8, 0xdd, 0x00, 0x00, 0x00, 0x0f, 0x49, 0x44, 0x41, 0x54, 0x78,
      0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0x08, 0x00, 0x12, 0xf0, 0x03, 0xfd, 0x5a,
      0x63, 0x39, 0xe5, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60,
      0x82};
  Image out;
  for (size_t length = 0; length + 12 < png.size(); ++length) {
    std::vector<uint8_t> cut(png.begin(), png.begin() + length);
    EXPECT_THROW(decode_image(cut.data(), cut.size(), ColorMode::kRGB, "cut.png", out),
                 DecodeError) << length;
  }
}

}  // namespace
}  // namespace ringloader::transforms
