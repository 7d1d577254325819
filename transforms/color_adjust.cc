// SPDX-License-Identifier: BSD-3-Clause
// The float/double mix below is Pillow's own (Convert.c, Blend.c): a double
// literal promotes an expression, a float variable rounds it back. Changing a
// type or the order of an operation changes some pixels, so the expressions
// are kept as Pillow writes them (checked over all 2^24 inputs against
// Pillow 9.4 for the HSV conversions).
#include "transforms/color_adjust.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "transforms/color_convert.h"

namespace ringloader::transforms {
namespace {

uint8_t clip8(int v) { return static_cast<uint8_t>(v <= 0 ? 0 : v < 256 ? v : 255); }

// Applies a per-byte table to every channel.
void map_bytes(Image& image, const std::array<uint8_t, 256>& table) {
  for (uint8_t& v : image.pixels) v = table[v];
}

}  // namespace

void adjust_brightness(Image& image, float factor) {
  if (factor == 1.0f) return;  // ImagingBlend's alpha == 1 shortcut: a copy
  std::array<uint8_t, 256> table;
  for (int v = 0; v < 256; ++v) table[v] = pil_blend(0, v, factor);
  map_bytes(image, table);
}

void adjust_contrast(Image& image, float factor) {
  if (factor == 1.0f) return;
  // ImageStat's mean of the L image: sum / count in double, then
  // int(mean + 0.5).
  std::array<uint64_t, 256> histogram{};
  const size_t pixels = static_cast<size_t>(image.height) * image.width;
  const uint8_t* p = image.pixels.data();
  for (size_t i = 0; i < pixels; ++i, p += image.channels) {
    ++histogram[image.channels == 1 ? p[0] : luma(p[0], p[1], p[2])];
  }
  uint64_t sum = 0;
  for (int v = 0; v < 256; ++v) sum += histogram[v] * v;
  const double mean = pixels ? static_cast<double>(sum) / static_cast<double>(pixels) : 0.0;
  const int gray = static_cast<int>(mean + 0.5);
  std::array<uint8_t, 256> table;
  for (int v = 0; v < 256; ++v) table[v] = pil_blend(gray, v, factor);
  map_bytes(image, table);
}

// The gray of each pixel repeated per channel into a small buffer, then one
// blend over the bytes (vectorised), chunk by chunk so the buffer stays in
// L1; the same pil_blend per byte as Pillow's ImagingBlend of the L->RGB
// image and the image.
void adjust_saturation(Image& image, float factor) {
  // On L images the degenerate image is the image: a + alpha * 0 == a.
  if (image.channels != 3 || factor == 1.0f) return;
  constexpr size_t kChunk = 2048;  // pixels
  uint8_t gray[kChunk * 3];
  const size_t pixels = static_cast<size_t>(image.height) * image.width;
  uint8_t* p = image.pixels.data();
  for (size_t begin = 0; begin < pixels; begin += kChunk) {
    const size_t n = std::min(kChunk, pixels - begin);
    uint8_t* chunk = p + begin * 3;
    for (size_t i = 0; i < n; ++i) {
      const uint8_t g = luma(chunk[3 * i], chunk[3 * i + 1], chunk[3 * i + 2]);
      gray[3 * i] = gray[3 * i + 1] = gray[3 * i + 2] = g;
    }
    size_t i = pil_blend_bytes_avx2(gray, chunk, n * 3, factor);
    for (; i < n * 3; ++i) chunk[i] = pil_blend(gray[i], chunk[i], factor);
  }
}

void adjust_hue(Image& image, double factor) {
  if (image.channels != 3) return;  // torchvision returns L images as they are
  // np.uint8(hue_factor * 255): the double truncates toward zero, then
  // wraps modulo 256 (np.uint8(-25.5) == 231).
  const uint8_t shift = static_cast<uint8_t>(static_cast<int>(factor * 255.0));
  const size_t pixels = static_cast<size_t>(image.height) * image.width;
  uint8_t* p = image.pixels.data();
  uint8_t hsv[3];
  for (size_t i = 0; i < pixels; ++i, p += 3) {
    rgb_to_hsv(p, hsv);
    hsv[0] = static_cast<uint8_t>(hsv[0] + shift);
    hsv_to_rgb(hsv, p);
  }
}

void to_grayscale(const Image& in, int channels, Image& out) {
  out.reshape(in.height, in.width, channels);
  const size_t pixels = static_cast<size_t>(in.height) * in.width;
  const uint8_t* p = in.pixels.data();
  uint8_t* q = out.pixels.data();
  for (size_t i = 0; i < pixels; ++i, p += in.channels, q += channels) {
    const uint8_t gray = in.channels == 1 ? p[0] : luma(p[0], p[1], p[2]);
    for (int c = 0; c < channels; ++c) q[c] = gray;
  }
}

void rgb_to_hsv(const uint8_t* rgb, uint8_t* hsv) {
  const uint8_t r = rgb[0], g = rgb[1], b = rgb[2];
  const uint8_t maxc = std::max(r, std::max(g, b));
  const uint8_t minc = std::min(r, std::min(g, b));
  uint8_t uh = 0, us = 0;
  if (minc != maxc) {
    const float cr = static_cast<float>(maxc - minc);
    const float s = cr / static_cast<float>(maxc);
    const float rc = static_cast<float>(maxc - r) / cr;
    const float gc = static_cast<float>(maxc - g) / cr;
    const float bc = static_cast<float>(maxc - b) / cr;
    float h;
    if (r == maxc) {
      h = bc - gc;
    } else if (g == maxc) {
      h = static_cast<float>(2.0 + rc - bc);
    } else {
      h = static_cast<float>(4.0 + gc - rc);
    }
    h = static_cast<float>(std::fmod(h / 6.0 + 1.0, 1.0));
    uh = clip8(static_cast<int>(h * 255.0));
    us = clip8(static_cast<int>(s * 255.0));
  }
  hsv[0] = uh;
  hsv[1] = us;
  hsv[2] = maxc;
}

void hsv_to_rgb(const uint8_t* hsv, uint8_t* rgb) {
  const uint8_t h = hsv[0], s = hsv[1], v = hsv[2];
  if (s == 0) {
    rgb[0] = rgb[1] = rgb[2] = v;
    return;
  }
  const int i = static_cast<int>(std::floor(static_cast<float>(h) * 6.0 / 255.0));
  const float f = static_cast<float>(static_cast<float>(h) * 6.0 / 255.0 - static_cast<float>(i));
  const float fs = static_cast<float>(static_cast<float>(s) / 255.0);
  const uint8_t up = clip8(static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs))));
  const uint8_t uq = clip8(static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs * f))));
  const uint8_t ut =
      clip8(static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs * (1.0 - f)))));
  const uint8_t order[6][3] = {{v, ut, up}, {uq, v, up}, {up, v, ut},
                               {up, uq, v}, {ut, up, v}, {v, up, uq}};
  const uint8_t* chosen = order[i % 6];
  rgb[0] = chosen[0];
  rgb[1] = chosen[1];
  rgb[2] = chosen[2];
}

}  // namespace ringloader::transforms
