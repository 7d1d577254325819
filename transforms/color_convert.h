// SPDX-License-Identifier: BSD-3-Clause
// Pixel-format conversions exactly as Pillow's Convert.c does them, so a
// decoded image equals PIL's Image.convert("RGB") / convert("L").
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringloader::transforms {

// Pillow's L24: ITU-R 601-2 luma in 16-bit fixed point, rounded.
inline uint8_t luma(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

// `channels` interleaved (1 L, 2 LA, 3 RGB, 4 RGBA) to RGB: alpha dropped,
// gray replicated, like convert("RGB") (no compositing).
void to_rgb(const uint8_t* in, int channels, uint8_t* out, size_t pixels);
// The same to L: color via luma(), alpha dropped.
void to_gray(const uint8_t* in, int channels, uint8_t* out, size_t pixels);
// Pillow's cmyk2rgb. PIL reads every 4-component JPEG with rawmode
// "CMYK;I" (Adobe's inverted convention, which Photoshop and PIL itself
// write), so `inverted` input is complemented first, as PIL's unpacker does.
void cmyk_to_rgb(const uint8_t* in, uint8_t* out, size_t pixels, bool inverted);
// PIL opens 16-bit grayscale PNGs as mode "I" (32-bit ints); its I->L and
// I->RGB conversions clip to [0, 255] rather than scaling. `channels`
// values per pixel (alpha from tRNS ignored), one byte out per pixel.
void gray16_to_8_clipped(const uint16_t* in, int channels, uint8_t* out, size_t pixels);

}  // namespace ringloader::transforms
