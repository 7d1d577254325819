// SPDX-License-Identifier: BSD-3-Clause
// Format sniffing and dispatch. Formats are told by magic bytes: a PNG
// named .jpg decodes, a text file named .png is refused with what it is.
#include "transforms/decode/decode.h"

#include <cstring>

#include "ringloader/errors.h"
#include "transforms/decode/decoders.h"

namespace ringloader::transforms {
namespace {

bool starts_with(const uint8_t* data, size_t size, const char* magic, size_t n) {
  return size >= n && std::memcmp(data, magic, n) == 0;
}

std::string hex_prefix(const uint8_t* data, size_t size) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size && i < 8; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 15];
    out += ' ';
  }
  if (!out.empty()) out.pop_back();
  return out;
}

}  // namespace

void decode_image(const uint8_t* data, size_t size, ColorMode mode,
                  const std::string& source, Image& out,
                  const DecodeLimits& limits, const RegionPlanner& region) {
  if (size == 0) throw DecodeError("ringloader: " + source + ": empty file");
  if (starts_with(data, size, "\xff\xd8\xff", 3)) {
    if (!region || !decode_jpeg_region(data, size, mode, source, out, limits, region)) {
      decode_jpeg(data, size, mode, source, out, limits);
    }
  } else if (starts_with(data, size, "\x89PNG\r\n\x1a\n", 8) ||
             starts_with(data, size, "BM", 2) ||
             starts_with(data, size, "GIF87a", 6) ||
             starts_with(data, size, "GIF89a", 6) ||
             (size >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '6')) {
    decode_with_stb(data, size, mode, source, out, limits);
  } else {
    throw DecodeError("ringloader: " + source +
                      ": unsupported or unrecognised image format (first bytes: " +
                      hex_prefix(data, size) +
                      "; supported: JPEG, PNG, BMP, GIF, PNM)");
  }
}

void check_pixel_limit(int64_t width, int64_t height, const std::string& source,
                       const DecodeLimits& limits) {
  if (width <= 0 || height <= 0) {
    throw DecodeError("ringloader: " + source + ": corrupt header (size " +
                      std::to_string(width) + "x" + std::to_string(height) + ")");
  }
  // Divide, not multiply: headers may claim two 32-bit sizes whose product
  // overflows int64 (found by fuzz_decode_png).
  if (width > limits.max_pixels / height) {
    throw DecodeError("ringloader: " + source + ": image of " +
                      std::to_string(width) + "x" + std::to_string(height) +
                      " pixels exceeds the limit of " +
                      std::to_string(limits.max_pixels) +
                      " pixels (decompression bomb?); raise max_image_pixels "
                      "to allow it");
  }
}

}  // namespace ringloader::transforms
