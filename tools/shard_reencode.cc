// SPDX-License-Identifier: BSD-3-Clause
#include "tools/shard_reencode.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "ringloader/errors.h"
#include "transforms/decode/decode.h"
#include "transforms/resample.h"

namespace ringloader::tools {
namespace {

bool is_jpeg(const std::vector<uint8_t>& bytes) {
  return bytes.size() > 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

// The size whose longer side is `max_side`, rounded as PIL's thumbnail()
// rounds, never below one pixel.
std::pair<int, int> shrunk_size(int height, int width, int max_side) {
  const double scale = static_cast<double>(max_side) / std::max(height, width);
  return {std::max(1, static_cast<int>(std::lround(height * scale))),
          std::max(1, static_cast<int>(std::lround(width * scale)))};
}

std::vector<uint8_t> encode_jpeg(const transforms::Image& image, int quality,
                                 const std::string& source) {
  std::unique_ptr<void, int (*)(tjhandle)> encoder(tjInitCompress(), tjDestroy);
  if (!encoder) throw DecodeError(source + ": cannot start the JPEG encoder");
  unsigned char* encoded = nullptr;
  unsigned long size = 0;
  const int format = image.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  const int subsampling = image.channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
  if (tjCompress2(encoder.get(), image.pixels.data(), image.width, 0, image.height, format,
                  &encoded, &size, subsampling, quality, TJFLAG_ACCURATEDCT) != 0) {
    std::string reason = tjGetErrorStr2(encoder.get());
    tjFree(encoded);
    throw DecodeError(source + ": re-encoding failed: " + reason);
  }
  std::vector<uint8_t> out(encoded, encoded + size);
  tjFree(encoded);
  return out;
}

}  // namespace

bool reencode_photo(std::vector<uint8_t>& bytes, const std::string& source,
                    const ReencodeOptions& options) {
  if (!options.active() || !is_jpeg(bytes)) return false;
  transforms::Image decoded;
  transforms::decode_image(bytes.data(), bytes.size(), ColorMode::kRGB, source, decoded);
  const bool too_big =
      options.max_side > 0 && std::max(decoded.height, decoded.width) > options.max_side;
  if (!too_big && !options.reencode_all) return false;
  if (too_big) {
    const auto [height, width] = shrunk_size(decoded.height, decoded.width, options.max_side);
    transforms::Image shrunk;
    transforms::resample(transforms::ImageView::of(decoded), height, width,
                         Interpolation::kBilinear, shrunk);
    decoded = std::move(shrunk);
  }
  bytes = encode_jpeg(decoded, options.quality, source);
  return true;
}

}  // namespace ringloader::tools
