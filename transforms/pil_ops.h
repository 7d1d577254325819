// SPDX-License-Identifier: BSD-3-Clause
// The point operations and the sharpness filter of torchvision 0.14's PIL
// backend, bit for bit with Pillow 9.4: ImageOps.posterize / solarize /
// invert / autocontrast / equalize (each a 256-entry table per band, built
// as ImageOps builds it) and ImageEnhance.Sharpness (a blend with the
// SMOOTH-filtered image). They work per channel on L and RGB images alike.
#pragma once

#include <cstdint>

#include "transforms/image.h"

namespace ringloader::transforms {

// ImageOps.posterize: keep the top `bits` (0..8) bits of every value.
void posterize(Image& image, int bits);
// ImageOps.solarize: v < threshold stays, the rest becomes 255 - v.
void solarize(Image& image, double threshold);
// ImageOps.invert: 255 - v.
void invert(Image& image);
// ImageOps.autocontrast() with no cutoff: each band's lowest value maps to
// 0 and its highest to 255 (int(v * scale + offset) in doubles); a band of
// one value is left alone.
void autocontrast(Image& image);
// ImageOps.equalize(): each band's values spread by its cumulative
// histogram, with ImageOps' integer steps.
void equalize(Image& image);
// ImageEnhance.Sharpness(image).enhance(factor): blend(SMOOTH(image), image,
// factor). SMOOTH is Pillow's 3x3 kernel (1 1 1 / 1 5 1 / 1 1 1) / 13 in
// float32, rounded, borders copied; images under 3x3 are left as they are.
// `scratch` holds the filtered image.
void adjust_sharpness(Image& image, Image& scratch, float factor);

// adjust_sharpness's interior row with AVX2 (float32, Pillow's order, so
// the same bytes): bytes [c, end) of `target` from rows y-1, y, y+1, eight
// at a time. Returns where it stopped (c when AVX2 is off or missing); the
// caller does the rest.
int sharpen_row_avx2(const uint8_t* above, const uint8_t* here, const uint8_t* below, int c,
                     int end, float factor, uint8_t* target);

}  // namespace ringloader::transforms
