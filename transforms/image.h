// An 8-bit image in memory: rows of interleaved channels (HWC), the layout PIL
// and every decoder produce. Ops read one and write another; the last op of a
// pipeline writes into memory it is given (the ring slot), never into an Image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringloader::transforms {

struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels bytes

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
  }
  size_t row_bytes() const { return static_cast<size_t>(width) * channels; }
  uint8_t* row(int y) { return pixels.data() + y * row_bytes(); }
  const uint8_t* row(int y) const { return pixels.data() + y * row_bytes(); }
};

}  // namespace ringloader::transforms
