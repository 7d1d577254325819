// SPDX-License-Identifier: BSD-3-Clause
// Tables are built in Python's integer and double arithmetic, in ImageOps'
// order; the filter keeps Pillow's float32 expression order (Filter.c's
// KERNEL1x3 sums), which -ffp-contract=off keeps from being fused.
#include "transforms/pil_ops.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "transforms/color_adjust.h"

namespace ringloader::transforms {
namespace {

using Table = std::array<uint8_t, 256>;

void map_all(Image& image, const Table& table) {
  for (uint8_t& v : image.pixels) v = table[v];
}

// One table per band: band c of every pixel goes through tables[c]
// (RGB written out: the general loop's inner loop over a run-time channel
// count costs twice as much).
void map_bands(Image& image, const std::array<Table, 4>& tables) {
  const int c = image.channels;
  uint8_t* p = image.pixels.data();
  uint8_t* const end = p + image.pixels.size();
  if (c == 3) {
    for (; p < end; p += 3) {
      p[0] = tables[0][p[0]];
      p[1] = tables[1][p[1]];
      p[2] = tables[2][p[2]];
    }
    return;
  }
  for (; p < end; p += c) {
    for (int ch = 0; ch < c; ++ch) p[ch] = tables[ch][p[ch]];
  }
}

// Each band's histogram. Even and odd pixels count into separate tables
// (summed at the end): neighbouring pixels often share a value, and one
// table would make each increment wait for the previous one's store.
std::array<std::array<uint64_t, 256>, 4> histograms(const Image& image) {
  const int c = image.channels;
  const uint8_t* p = image.pixels.data();
  const size_t pixels = static_cast<size_t>(image.height) * image.width;
  std::array<std::array<uint64_t, 256>, 4> out{};
  if (pixels > 0xFFFFFFFFu) {  // beyond uint32 counters (no decoded image is)
    for (size_t i = 0; i < pixels; ++i, p += c) {
      for (int ch = 0; ch < c; ++ch) ++out[ch][p[ch]];
    }
    return out;
  }
  std::array<std::array<uint32_t, 256>, 8> partial{};  // [parity * 4 + band]
  size_t i = 0;
  for (; i + 2 <= pixels; i += 2, p += 2 * c) {
    for (int ch = 0; ch < c; ++ch) {
      ++partial[ch][p[ch]];
      ++partial[4 + ch][p[c + ch]];
    }
  }
  for (; i < pixels; ++i, p += c) {
    for (int ch = 0; ch < c; ++ch) ++partial[ch][p[ch]];
  }
  for (int ch = 0; ch < c; ++ch) {
    for (int v = 0; v < 256; ++v) out[ch][v] = uint64_t{partial[ch][v]} + partial[4 + ch][v];
  }
  return out;
}

Table identity() {
  Table t;
  for (int i = 0; i < 256; ++i) t[i] = static_cast<uint8_t>(i);
  return t;
}

Table autocontrast_table(const std::array<uint64_t, 256>& h) {
  int lo = 0, hi = 255;
  while (lo < 255 && !h[lo]) ++lo;
  while (hi > 0 && !h[hi]) --hi;
  if (hi <= lo) return identity();
  const double scale = 255.0 / (hi - lo);
  const double offset = -lo * scale;
  Table t;
  for (int ix = 0; ix < 256; ++ix) {
    const int v = static_cast<int>(ix * scale + offset);  // int(): toward zero
    t[ix] = static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
  }
  return t;
}

Table equalize_table(const std::array<uint64_t, 256>& h) {
  uint64_t total = 0, last = 0;
  int nonzero = 0;
  for (int i = 0; i < 256; ++i) {
    if (!h[i]) continue;
    total += h[i];
    last = h[i];
    ++nonzero;
  }
  if (nonzero <= 1) return identity();
  const uint64_t step = (total - last) / 255;
  if (!step) return identity();
  Table t;
  uint64_t n = step / 2;
  for (int i = 0; i < 256; ++i) {
    const uint64_t v = n / step;
    t[i] = static_cast<uint8_t>(v > 255 ? 255 : v);  // Image.point clips
    n += h[i];
  }
  return t;
}

uint8_t clip8(float v) {
  if (v <= 0.0f) return 0;
  if (v >= 255.0f) return 255;
  return static_cast<uint8_t>(v);
}

// Filter.c's KERNEL1x3 for a kernel row (k, m, k): three products, summed
// left to right.
float row_sum(const uint8_t* row, int x, int d, float k, float m) {
  return static_cast<float>(row[x - d]) * k + static_cast<float>(row[x]) * m +
         static_cast<float>(row[x + d]) * k;
}

// SMOOTH's kernel after ImagingFilter3x3 divides it: kerneldata[i] /= 13.
constexpr float kSide = 1.0f / 13.0f, kCentre = 5.0f / 13.0f;

// ImagingFilter3x3 with SMOOTH at byte i of an interior row: rows y+1, y,
// y-1 in that order, as Pillow pairs them with the kernel's rows, from
// offset 0.5.
uint8_t smooth_at(const uint8_t* above, const uint8_t* here, const uint8_t* below, int i,
                  int c) {
  float ss = 0.0f + 0.5f;
  ss += row_sum(below, i, c, kSide, kSide);
  ss += row_sum(here, i, c, kSide, kCentre);
  ss += row_sum(above, i, c, kSide, kSide);
  return clip8(ss);
}

}  // namespace

void posterize(Image& image, int bits) {
  const int mask = ~((1 << (8 - bits)) - 1);
  Table t;
  for (int i = 0; i < 256; ++i) t[i] = static_cast<uint8_t>(i & mask);
  map_all(image, t);
}

void solarize(Image& image, double threshold) {
  Table t;
  for (int i = 0; i < 256; ++i) t[i] = static_cast<uint8_t>(i < threshold ? i : 255 - i);
  map_all(image, t);
}

void invert(Image& image) {
  for (uint8_t& v : image.pixels) v = static_cast<uint8_t>(255 - v);
}

void autocontrast(Image& image) {
  const auto h = histograms(image);
  std::array<Table, 4> tables;
  for (int c = 0; c < image.channels; ++c) tables[c] = autocontrast_table(h[c]);
  map_bands(image, tables);
}

void equalize(Image& image) {
  const auto h = histograms(image);
  std::array<Table, 4> tables;
  for (int c = 0; c < image.channels; ++c) tables[c] = equalize_table(h[c]);
  map_bands(image, tables);
}

// SMOOTH and the blend in one pass, into `scratch` (the filter reads the
// rows around the one it writes). SMOOTH copies the border pixels, and
// blend(v, v) is v, so the border is the image's.
void adjust_sharpness(Image& image, Image& scratch, float factor) {
  if (image.width < 3 || image.height < 3) return;  // ImagingFilter copies
  if (factor == 1.0f) return;  // ImagingBlend's alpha == 1: the image
  const int c = image.channels, h = image.height, w = image.width;
  scratch.reshape(h, w, c);
  std::memcpy(scratch.row(0), image.row(0), image.row_bytes());
  std::memcpy(scratch.row(h - 1), image.row(h - 1), image.row_bytes());
  const int end = (w - 1) * c;  // the row's last pixel is border
  for (int y = 1; y < h - 1; ++y) {
    const uint8_t* above = image.row(y - 1);
    const uint8_t* here = image.row(y);
    const uint8_t* below = image.row(y + 1);
    uint8_t* target = scratch.row(y);
    std::memcpy(target, here, c);
    std::memcpy(target + end, here + end, c);
    int i = sharpen_row_avx2(above, here, below, c, end, factor, target);
    for (; i < end; ++i) {
      target[i] = pil_blend(smooth_at(above, here, below, i, c), here[i], factor);
    }
  }
  std::swap(image, scratch);
}

}  // namespace ringloader::transforms
