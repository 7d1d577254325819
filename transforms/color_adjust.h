// SPDX-License-Identifier: BSD-3-Clause
// PIL's colour operations bit for bit, as torchvision 0.14 calls them on PIL
// images (Pillow 9.4): ImageEnhance's blends (F.adjust_brightness /
// contrast / saturation), the RGB <-> HSV round trip of F.adjust_hue, and
// convert("L") for F.to_grayscale. Pillow blends in float32 and truncates;
// every function here does the same arithmetic in the same order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transforms/image.h"

namespace ringloader::transforms {

// Pillow's ImagingBlend for one byte: float32 `a + alpha * (b - a)`,
// truncated, clipped to [0, 255] (clipping only matters when extrapolating).
// (Written so that a NaN from an infinite factor gives 0, not undefined
// behaviour; every other value is Pillow's.)
inline uint8_t pil_blend(int a, int b, float alpha) {
  const float v = static_cast<float>(a) + alpha * static_cast<float>(b - a);
  if (v >= 255.0f) return 255;
  if (v > 0.0f) return static_cast<uint8_t>(v);
  return 0;
}

// image[i] = pil_blend(degenerate[i], image[i], alpha) for i in [0, count)
// with AVX2, eight bytes per step, the same float32 operations (so the same
// bytes); returns how many it did (0 without AVX2): the caller does the rest.
size_t pil_blend_bytes_avx2(const uint8_t* degenerate, uint8_t* image, size_t count,
                            float alpha);

// ImageEnhance.Brightness: blend(black, image, factor).
void adjust_brightness(Image& image, float factor);
// ImageEnhance.Contrast: blend(gray, image, factor), gray being the L
// image's mean rounded as int(mean + 0.5).
void adjust_contrast(Image& image, float factor);
// ImageEnhance.Color: blend(image.convert("L").convert(mode), image,
// factor). The identity on 1-channel images.
void adjust_saturation(Image& image, float factor);
// _functional_pil.adjust_hue: HSV hue plus np.uint8(factor * 255) with uint8
// wraparound, back to RGB. The identity on 1-channel images. |factor| <= 0.5.
void adjust_hue(Image& image, double factor);
// F.to_grayscale: convert("L") (ITU-R 601-2 luma, Pillow's rounding), the
// luma repeated in each of `channels` (1 or 3) output channels.
void to_grayscale(const Image& in, int channels, Image& out);

// Pillow's rgb2hsv_row / hsv2rgb (Convert.c) for one pixel.
void rgb_to_hsv(const uint8_t* rgb, uint8_t* hsv);
void hsv_to_rgb(const uint8_t* hsv, uint8_t* rgb);

}  // namespace ringloader::transforms
