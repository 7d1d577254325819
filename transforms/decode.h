// Decoding encoded image bytes into an 8-bit Image converted like PIL's
// Image.convert("RGB") or convert("L"). The format is sniffed from magic
// bytes, never from the file extension.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ringloader/transforms.h"
#include "transforms/image.h"

namespace ringloader::transforms {

struct DecodeLimits {
  // Images with more pixels than this are refused before any allocation
  // (decompression bombs). Pillow's default warning limit is ~89M pixels.
  int64_t max_pixels = 178956970;
};

// Throws DecodeError whose message names `source` (file name, member name)
// and the reason: empty, truncated, corrupt header, unsupported format, too
// many pixels.
void decode_image(const uint8_t* data, size_t size, ColorMode mode,
                  const std::string& source, Image& out,
                  const DecodeLimits& limits = {});

}  // namespace ringloader::transforms
