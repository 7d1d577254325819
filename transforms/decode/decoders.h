// SPDX-License-Identifier: BSD-3-Clause
// The format-specific decoders behind decode_image().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transforms/decode/decode.h"

namespace ringloader::transforms {

void decode_jpeg(const uint8_t* data, size_t size, ColorMode mode,
                 const std::string& source, Image& out, const DecodeLimits& limits);
// Decodes only the rows and columns around the box `region` plans (plus a
// margin that keeps upsampling context identical) through libjpeg's
// scanline API. Returns false, having decoded nothing, when it cannot give
// pixels identical to decode_jpeg's: no box, a box covering nearly all of
// the image, CMYK, a truncated file, or any libjpeg warning or error (the
// full decode then reports those exactly as before).
bool decode_jpeg_region(const uint8_t* data, size_t size, ColorMode mode,
                        const std::string& source, Image& out, const DecodeLimits& limits,
                        const RegionPlanner& region);
// True when the data stops before the image does (see decode_jpeg.cc).
bool ends_before_its_image(const uint8_t* data, size_t size);
void decode_with_stb(const uint8_t* data, size_t size, ColorMode mode,
                     const std::string& source, Image& out,
                     const DecodeLimits& limits);
// Refuses nonsense sizes and images over the pixel limit, before any
// pixel buffer is allocated.
void check_pixel_limit(int64_t width, int64_t height, const std::string& source,
                       const DecodeLimits& limits);

}  // namespace ringloader::transforms
