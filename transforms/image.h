// SPDX-License-Identifier: BSD-3-Clause
// An 8-bit image in memory: rows of interleaved channels (HWC), the layout PIL
// and every decoder produce. Ops read one and write another; the last op of a
// pipeline writes into memory it is given (the ring slot), never into an Image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringloader::transforms {

// A rectangle: top, left, height, width (torchvision's i, j, h, w).
struct Box {
  int top = 0, left = 0, height = 0, width = 0;
};

struct Image {
  // Where these pixels lie in the file's full image. A region decode
  // (decode_image with a RegionPlanner) produces only part of the image and
  // says which; reshape() makes an image whole again, so only the first op
  // of a pipeline ever sees a part.
  // A part decoded at a reduced DCT scale (fast mode) has top/left and its
  // pixels in units of 1/scale_denom of the full image's.
  struct Window {
    int top = 0, left = 0;
    int full_height = 0, full_width = 0;  // 0: the image is whole
    int scale_denom = 1;
  };

  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels bytes
  Window window;

  Image() = default;
  Image(int h, int w, int c)
      : height(h), width(w), channels(c),
        pixels(static_cast<size_t>(h) * w * c) {}

  // Reuses the allocation when it is big enough: workers keep scratch images.
  void reshape(int h, int w, int c) {
    height = h;
    width = w;
    channels = c;
    pixels.resize(static_cast<size_t>(h) * w * c);
    window = {};
  }
  bool is_partial() const { return window.full_height != 0; }
  int full_height() const { return is_partial() ? window.full_height : height; }
  int full_width() const { return is_partial() ? window.full_width : width; }
  size_t row_bytes() const { return static_cast<size_t>(width) * channels; }
  uint8_t* row(int y) { return pixels.data() + y * row_bytes(); }
  const uint8_t* row(int y) const { return pixels.data() + y * row_bytes(); }
};

}  // namespace ringloader::transforms
