// SPDX-License-Identifier: BSD-3-Clause
// Every way decoding can fail gives a DecodeError naming the file and the
// reason (empty, unsupported format with its first bytes, corrupt header,
// corrupt data, truncated, too many pixels), refused before any big
// allocation. Test images are made here with TurboJPEG and stb-free bytes,
// so this file needs no Python.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <string>
#include <vector>

#include "ringloader/errors.h"
#include "transforms/decode/decode.h"

namespace ringloader::transforms {
namespace {

std::vector<uint8_t> make_jpeg(int width, int height, bool progressive = false) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 7 % 251);
  tjhandle handle = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int flags = progressive ? TJFLAG_PROGRESSIVE : 0;
  EXPECT_EQ(tjCompress2(handle, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &size,
                        TJSAMP_420, 90, flags),
            0);
  std::vector<uint8_t> out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(handle);
  return out;
}

// A 2x1 RGB PNG.
const std::vector<uint8_t> kPng = {
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48,
    0x44, 0x52, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00,
    0x00, 0x7b, 0x40, 0xe8, 0xdd, 0x00, 0x00, 0x00, 0x0f, 0x49, 0x44, 0x41, 0x54, 0x78,
    0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xc0, 0xc0, 0xf0, 0x1f, 0x00, 0x07, 0x00, 0x01, 0xff,
    0x7e, 0x08, 0xb1, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42,
    0x60, 0x82};

std::string decode_error(const std::vector<uint8_t>& bytes, int64_t max_pixels = 1 << 30) {
  Image out;
  try {
    decode_image(bytes.data(), bytes.size(), ColorMode::kRGB, "x/bad.img", out,
                 DecodeLimits{max_pixels});
  } catch (const DecodeError& error) {
    return error.what();
  }
  return "(no error)";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(DecodeErrors, ValidInputsDecode) {
  Image out;
  const auto jpeg = make_jpeg(33, 17);
  decode_image(jpeg.data(), jpeg.size(), ColorMode::kRGB, "ok.jpg", out);
  EXPECT_EQ(out.width, 33);
  EXPECT_EQ(out.height, 17);
  decode_image(kPng.data(), kPng.size(), ColorMode::kGray, "ok.png", out);
  EXPECT_EQ(out.width, 2);
  EXPECT_EQ(out.channels, 1);
}

TEST(DecodeErrors, EmptyFile) { EXPECT_HAS(decode_error({}), "x/bad.img: empty file"); }

TEST(DecodeErrors, UnsupportedFormatShowsTheMagicBytes) {
  const std::string message = decode_error({'h', 'e', 'l', 'l', 'o'});
  EXPECT_HAS(message, "x/bad.img");
  EXPECT_HAS(message, "unsupported");
  EXPECT_HAS(message, "68 65 6c 6c 6f");
  EXPECT_HAS(message, "JPEG, PNG");
  // WebP is a real format we do not decode: still a clear refusal.
  EXPECT_HAS(decode_error({'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P'}),
             "52 49 46 46");
}

TEST(DecodeErrors, CorruptHeaders) {
  std::vector<uint8_t> png(kPng.begin(), kPng.begin() + 10);
  EXPECT_HAS(decode_error(png), "x/bad.img: corrupt header");
  EXPECT_HAS(decode_error({0xff, 0xd8, 0xff, 0xe0, 0, 16}), "x/bad.img: corrupt JPEG header");
  EXPECT_HAS(decode_error({0xff, 0xd8, 0xff, 0xdb, 0, 2, 1, 2}), "corrupt JPEG header");
  EXPECT_HAS(decode_error({'G', 'I', 'F', '8', '9', 'a', 1}), "corrupt header");
  EXPECT_HAS(decode_error({'B', 'M', 1, 2, 3}), "corrupt header");
  // A PNG header claiming 0 x 1 pixels.
  std::vector<uint8_t> zero = kPng;
  zero[19] = 0;
  EXPECT_HAS(decode_error(zero), "corrupt header");
}

TEST(DecodeErrors, CorruptJpegData) {
  auto jpeg = make_jpeg(64, 64);
  // Replace the Huffman tables' counts with nonsense: libjpeg's fatal error.
  for (size_t i = 2; i + 1 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc4) {
      for (size_t k = i + 5; k < i + 21; ++k) jpeg[k] = 0xff;
      break;
    }
  }
  EXPECT_HAS(decode_error(jpeg), "x/bad.img: corrupt JPEG");
}

TEST(DecodeErrors, TruncatedFiles) {
  for (bool progressive : {false, true}) {
    auto jpeg = make_jpeg(64, 48, progressive);
    jpeg.resize(jpeg.size() * 2 / 3);
    EXPECT_HAS(decode_error(jpeg), "x/bad.img: truncated JPEG");
  }
  std::vector<uint8_t> png(kPng.begin(), kPng.begin() + 48);  // inside IDAT
  EXPECT_HAS(decode_error(png), "x/bad.img: corrupt or truncated PNG");
}

TEST(DecodeErrors, TooManyPixelsIsRefusedBeforeDecoding) {
  // JPEG: patch the frame header (SOF0) to 60000 x 50000.
  auto jpeg = make_jpeg(16, 16);
  for (size_t i = 2; i + 8 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) {
      jpeg[i + 5] = 50000 >> 8, jpeg[i + 6] = 50000 & 255;  // height
      jpeg[i + 7] = 60000 >> 8, jpeg[i + 8] = 60000 & 255;  // width
      break;
    }
  }
  std::string message = decode_error(jpeg, 1000000);
  EXPECT_HAS(message, "x/bad.img: image of 60000x50000 pixels exceeds the limit of "
                      "1000000 pixels");
  // PNG: IHDR says 70000 x 30000 (stb alone would call it corrupt).
  std::vector<uint8_t> png = kPng;
  png[17] = 70000 >> 16, png[18] = (70000 >> 8) & 255, png[19] = 70000 & 255;
  png[21] = 30000 >> 16, png[22] = (30000 >> 8) & 255, png[23] = 30000 & 255;
  EXPECT_HAS(decode_error(png), "image of 70000x30000 pixels exceeds the limit of "
                                "1073741824 pixels");
  // PNG: both sizes near 2^32, whose product overflows 64 bits.
  png = kPng;
  for (int i = 16; i < 24; ++i) png[i] = 0xff;
  png[16] = 0x7f, png[20] = 0x7f;  // PNG sizes are at most 2^31 - 1
  EXPECT_HAS(decode_error(png), "2147483647x2147483647 pixels exceeds the limit");
  png[16] = 0xff, png[20] = 0xff;  // out of PNG's range: any clear error
  EXPECT_HAS(decode_error(png), "x/bad.img: ");
  // BMP: 100000 x 100000 in the info header.
  std::vector<uint8_t> bmp(54, 0);
  bmp[0] = 'B', bmp[1] = 'M', bmp[10] = 54, bmp[14] = 40;
  bmp[18] = 0xa0, bmp[19] = 0x86, bmp[20] = 0x01;
  bmp[22] = 0xa0, bmp[23] = 0x86, bmp[24] = 0x01;
  bmp[26] = 1, bmp[28] = 24;
  EXPECT_HAS(decode_error(bmp, 1000000), "100000x100000 pixels exceeds the limit");
}

// Robustness without the reference: every prefix of a small JPEG and PNG is
// a DecodeError or a valid image, never a crash (run under ASan in CI).
TEST(DecodeErrors, EveryPrefixIsAnErrorOrAnImage) {
  for (const auto& full : {make_jpeg(40, 30), make_jpeg(40, 30, true), kPng}) {
    for (size_t length = 0; length < full.size(); ++length) {
      std::vector<uint8_t> cut(full.begin(), full.begin() + length);
      Image out;
      try {
        decode_image(cut.data(), cut.size(), ColorMode::kRGB, "cut", out);
        EXPECT_GE(length + 24, full.size()) << "only cuts after the pixel data load";
      } catch (const DecodeError& error) {
        EXPECT_HAS(std::string(error.what()), "cut: ");
      }
    }
  }
}

// Found by fuzz_decode_png: an empty first IDAT chunk makes stb copy zero
// bytes to a null buffer. The file is corrupt (IDAT holds no zlib stream)
// and must say so; under UBSan this also proves stb's TU is built so that
// the harmless copy does not stop the run.
TEST(DecodeErrors, EmptyFirstIdatChunkIsCorrupt) {
  const std::vector<uint8_t> png = {
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48,
      0x44, 0x52, 0x00, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00, 0x0a, 0x08, 0x04, 0x00, 0x00,
      0x00, 0xff, 0x1c, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x49, 0x44, 0x41, 0x54, 0x78,
      0x9c, 0xff, 0x1c, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_HAS(decode_error(png), "x/bad.img: corrupt or truncated PNG");
}

}  // namespace
}  // namespace ringloader::transforms
