// SPDX-License-Identifier: BSD-3-Clause
// PNG chunk-level facts stb_image does not expose: the header fields that
// decide PIL's mode, and PIL's tolerance for files cut after the last pixel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringloader::transforms {

bool is_png(const uint8_t* data, size_t size);

// IHDR's fields; zeros when the header is cut short. Read here because
// stb_image rejects big images as "corrupt" before the pixel limit can say
// what is wrong.
struct PngHeader {
  int64_t width = 0;
  int64_t height = 0;
  int bit_depth = 0;
  int color_type = 0;  // 0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA
};
PngHeader read_png_header(const uint8_t* data, size_t size);

// PIL reads pixel data as a stream and only fails when the image rows run
// out; a file cut inside the final IDAT's checksum, its CRC or IEND still
// loads. stb_image insists on whole chunks, so for a truncated file this
// returns a copy whose last IDAT is shortened to the bytes present and
// closed with IEND; stb then decodes it exactly when the rows are all there.
// Empty when the file is not cut inside or after its image data.
std::vector<uint8_t> close_truncated_png(const uint8_t* data, size_t size);

}  // namespace ringloader::transforms
