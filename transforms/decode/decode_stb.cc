// SPDX-License-Identifier: BSD-3-Clause
// PNG, BMP, GIF (first frame) and PNM through stb_image. Sizes are read
// with stbi_info first so a bomb is refused before stb allocates; pixels are
// decoded with the file's own channels and converted the way PIL converts.
#include <climits>
#include <memory>
#include <vector>

#include "ringloader/errors.h"
#include "transforms/color_convert.h"
#include "transforms/decode/decoders.h"
#include "transforms/decode/png_chunks.h"
#include "transforms/decode/stb_config.h"

namespace ringloader::transforms {
namespace {

struct StbFree {
  void operator()(void* pixels) const { stbi_image_free(pixels); }
};
using StbPixels = std::unique_ptr<stbi_uc, StbFree>;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw DecodeError("ringloader: " + source + ": " + what);
}

// stb's own words in parentheses; some of its failure paths set none.
std::string stb_reason() {
  const char* reason = stbi_failure_reason();
  return reason && *reason ? std::string(" (") + reason + ")" : std::string();
}

// PIL's mode "I" for 16-bit gray PNGs: values clip to 255 when converted.
void decode_gray16_png(const uint8_t* data, int length, ColorMode mode,
                       const std::string& source, Image& out) {
  int width = 0, height = 0, channels = 0;
  std::unique_ptr<stbi_us, StbFree> pixels(
      stbi_load_16_from_memory(data, length, &width, &height, &channels, 0));
  if (!pixels) {
    fail(source, "corrupt or truncated PNG" + stb_reason());
  }
  const size_t count = static_cast<size_t>(width) * height;
  out.reshape(height, width, 1);
  gray16_to_8_clipped(pixels.get(), channels, out.pixels.data(), count);
  if (mode == ColorMode::kRGB) {
    std::vector<uint8_t> gray(out.pixels);
    out.reshape(height, width, 3);
    to_rgb(gray.data(), 1, out.pixels.data(), count);
  }
}

// stb_image refuses a PNG cut after its last pixel row, which PIL loads, so
// a cut file is decoded from its closed copy. Going there first (stb would
// fail on the cut file anyway) also spares the allocation stb makes for the
// bytes an IDAT claims before finding them missing: up to 4 GiB for a
// corrupt length.
StbPixels load_png(const uint8_t* data, size_t size, int& width, int& height,
                   int& channels) {
  const std::vector<uint8_t> closed = close_truncated_png(data, size);
  const uint8_t* bytes = closed.empty() ? data : closed.data();
  const size_t length = closed.empty() ? size : closed.size();
  return StbPixels(stbi_load_from_memory(bytes, static_cast<int>(length), &width, &height,
                                         &channels, 0));
}

// The format the magic bytes announced, for "corrupt header" messages.
std::string stb_format_name(const uint8_t* data, size_t size, bool png) {
  if (png) return "PNG";
  if (size >= 2 && data[0] == 'B' && data[1] == 'M') return "BMP";
  if (size >= 3 && data[0] == 'G' && data[1] == 'I' && data[2] == 'F') return "GIF";
  return "PNM";
}

}  // namespace

void decode_with_stb(const uint8_t* data, size_t size, ColorMode mode,
                     const std::string& source, Image& out,
                     const DecodeLimits& limits) {
  if (size > static_cast<size_t>(INT_MAX)) fail(source, "file larger than 2 GiB");
  const int length = static_cast<int>(size);
  const bool png = is_png(data, size);
  const PngHeader header = read_png_header(data, size);
  if (png && header.width > 0) check_pixel_limit(header.width, header.height, source, limits);
  int width = 0, height = 0, channels = 0;
  if (!stbi_info_from_memory(data, length, &width, &height, &channels)) {
    fail(source, "corrupt header of a " + stb_format_name(data, size, png) +
                     " file" + stb_reason());
  }
  check_pixel_limit(width, height, source, limits);
  if (png && header.bit_depth == 16 && header.color_type == 0) {
    return decode_gray16_png(data, length, mode, source, out);
  }
  StbPixels pixels = png ? load_png(data, size, width, height, channels)
                         : StbPixels(stbi_load_from_memory(data, length, &width, &height,
                                                           &channels, 0));
  if (!pixels && png) fail(source, "corrupt or truncated PNG" + stb_reason());
  if (!pixels) {
    fail(source, "corrupt or truncated image" + stb_reason());
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
