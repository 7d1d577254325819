// PNG, BMP, GIF (first frame) and PNM through stb_image. Sizes are read
// with stbi_info first so a bomb is refused before stb allocates.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_ONLY_PNM
#include <stb_image.h>

#include <climits>
#include <memory>

#include "ringloader/errors.h"
#include "transforms/color_convert.h"
#include "transforms/decoders.h"

namespace ringloader::transforms {
namespace {

struct StbFree {
  void operator()(stbi_uc* pixels) const { stbi_image_free(pixels); }
};

}  // namespace

void decode_with_stb(const uint8_t* data, size_t size, ColorMode mode,
                     const std::string& source, Image& out,
                     const DecodeLimits& limits) {
  if (size > static_cast<size_t>(INT_MAX)) {
    throw DecodeError("ringloader: " + source + ": file larger than 2 GiB");
  }
  const int length = static_cast<int>(size);
  int width = 0, height = 0, channels = 0;
  if (!stbi_info_from_memory(data, length, &width, &height, &channels)) {
    throw DecodeError("ringloader: " + source + ": corrupt header (" +
                      stbi_failure_reason() + ")");
  }
  check_pixel_limit(width, height, source, limits);
  // Decode with the file's own channels and convert like PIL: stb's own
  // RGB-to-gray rounding differs from Pillow's.
  std::unique_ptr<stbi_uc, StbFree> pixels(
      stbi_load_from_memory(data, length, &width, &height, &channels, 0));
  if (!pixels) {
    throw DecodeError("ringloader: " + source + ": corrupt or truncated image (" +
                      stbi_failure_reason() + ")");
  }
  const size_t count = static_cast<size_t>(width) * height;
  if (mode == ColorMode::kGray) {
    out.reshape(height, width, 1);
    to_gray(pixels.get(), channels, out.pixels.data(), count);
  } else {
    out.reshape(height, width, 3);
    to_rgb(pixels.get(), channels, out.pixels.data(), count);
  }
}

}  // namespace ringloader::transforms
