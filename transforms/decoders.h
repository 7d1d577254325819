// The format-specific decoders behind decode_image().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transforms/decode.h"

namespace ringloader::transforms {

void decode_jpeg(const uint8_t* data, size_t size, ColorMode mode,
                 const std::string& source, Image& out, const DecodeLimits& limits);
void decode_with_stb(const uint8_t* data, size_t size, ColorMode mode,
                     const std::string& source, Image& out,
                     const DecodeLimits& limits);
// Refuses nonsense sizes and images over the pixel limit, before any
// pixel buffer is allocated.
void check_pixel_limit(int64_t width, int64_t height, const std::string& source,
                       const DecodeLimits& limits);

}  // namespace ringloader::transforms
