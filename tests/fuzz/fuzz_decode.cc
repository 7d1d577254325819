// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer harness for one decoder. RINGLOADER_FUZZ_FORMAT (set per target
// in CMake) picks the format whose magic bytes are prepended when the input lacks it, so every input reaches
// that decoder instead of the format sniffer's "unsupported" branch. A
// DecodeError is the expected answer to garbage; anything else (a crash, a
// sanitizer report, another exception type, an image with impossible
// geometry) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringloader/errors.h"
#include "transforms/decode/decode.h"

namespace {

const std::string& magic() {
  static const std::string kMagic[] = {
      std::string("\xff\xd8\xff", 3),             // JPEG
      std::string("\x89PNG\r\n\x1a\n", 8),          // PNG
      std::string("BM", 2),                         // BMP
      std::string("GIF8", 4),                       // GIF
  };
  return kMagic[RINGLOADER_FUZZ_FORMAT];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> input(data, data + size);
  if (size < magic().size() || std::memcmp(data, magic().data(), magic().size()) != 0) {
    input.insert(input.begin(), magic().begin(), magic().end());
  }
  using ringloader::ColorMode;
  const ColorMode mode = size > 0 && (data[size - 1] & 1) ? ColorMode::kGray : ColorMode::kRGB;
  ringloader::transforms::Image image;
  try {
    // 64 kpixel cap: the fuzzer looks for memory bugs, not for big images,
    // and small ones keep it fast.
    ringloader::transforms::decode_image(input.data(), input.size(), mode, "fuzz",
                                         image, ringloader::transforms::DecodeLimits{1 << 16});
  } catch (const ringloader::DecodeError&) {
    return 0;
  }
  const int channels = mode == ColorMode::kGray ? 1 : 3;
  if (image.width <= 0 || image.height <= 0 || image.channels != channels ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * channels) {
    std::abort();
  }
  return 0;
}
