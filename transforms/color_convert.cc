// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/color_convert.h"

#include <algorithm>
#include <cstring>

namespace ringloader::transforms {

void to_rgb(const uint8_t* in, int channels, uint8_t* out, size_t pixels) {
  if (channels == 3) {
    std::memcpy(out, in, pixels * 3);
    return;
  }
  for (size_t i = 0; i < pixels; ++i, in += channels, out += 3) {
    if (channels <= 2) {
      out[0] = out[1] = out[2] = in[0];
    } else {
      out[0] = in[0];
      out[1] = in[1];
      out[2] = in[2];
    }
  }
}

void to_gray(const uint8_t* in, int channels, uint8_t* out, size_t pixels) {
  for (size_t i = 0; i < pixels; ++i, in += channels) {
    out[i] = channels <= 2 ? in[0] : luma(in[0], in[1], in[2]);
  }
}

void cmyk_to_rgb(const uint8_t* in, uint8_t* out, size_t pixels, bool inverted) {
  auto muldiv255 = [](int a, int b) {
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  auto clip = [](int v) { return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); };
  const int flip = inverted ? 255 : 0;  // x ^ 255 == 255 - x for bytes
  for (size_t i = 0; i < pixels; ++i, in += 4, out += 3) {
    const int not_k = 255 - (in[3] ^ flip);
    out[0] = clip(not_k - muldiv255(in[0] ^ flip, not_k));
    out[1] = clip(not_k - muldiv255(in[1] ^ flip, not_k));
    out[2] = clip(not_k - muldiv255(in[2] ^ flip, not_k));
  }
}

void gray16_to_8_clipped(const uint16_t* in, int channels, uint8_t* out, size_t pixels) {
  for (size_t i = 0; i < pixels; ++i, in += channels) {
    out[i] = static_cast<uint8_t>(std::min<int>(in[0], 255));
  }
}

}  // namespace ringloader::transforms
