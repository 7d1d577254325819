// JPEG through the TurboJPEG API. Pillow decodes with libjpeg's defaults
// (accurate integer DCT, fancy upsampling); TJFLAG_ACCURATEDCT selects the
// same, so the pixels equal PIL's.
#include <turbojpeg.h>

#include <memory>
#include <vector>

#include "ringloader/errors.h"
#include "transforms/color_convert.h"
#include "transforms/decoders.h"

namespace ringloader::transforms {
namespace {

struct TjCloser {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using TjHandle = std::unique_ptr<void, TjCloser>;

// One decompressor per thread: creating one costs more than a small decode.
tjhandle thread_decompressor() {
  thread_local TjHandle handle(tjInitDecompress());
  return handle.get();
}

[[noreturn]] void fail(tjhandle handle, const std::string& source,
                       const char* stage) {
  std::string reason = tjGetErrorStr2(handle);
  throw DecodeError("ringloader: " + source + ": corrupt or truncated JPEG (" +
                    stage + ": " + reason + ")");
}

}  // namespace

void decode_jpeg(const uint8_t* data, size_t size, ColorMode mode,
                 const std::string& source, Image& out,
                 const DecodeLimits& limits) {
  tjhandle handle = thread_decompressor();
  if (!handle) throw DecodeError("ringloader: cannot create a JPEG decoder");
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, data, static_cast<unsigned long>(size), &width,
                          &height, &subsampling, &colorspace) != 0) {
    fail(handle, source, "header");
  }
  check_pixel_limit(width, height, source, limits);
  const int flags = TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING;
  const bool gray_source = colorspace == TJCS_GRAY;
  const bool cmyk_source = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  int format = gray_source ? TJPF_GRAY : cmyk_source ? TJPF_CMYK : TJPF_RGB;
  int channels = tjPixelSize[format];
  thread_local std::vector<uint8_t> decoded;
  decoded.resize(static_cast<size_t>(width) * height * channels);
  // STOPONWARNING: a truncated file is an error, as in PIL (which raises
  // unless LOAD_TRUNCATED_IMAGES is set), not a grey-padded image.
  if (tjDecompress2(handle, data, static_cast<unsigned long>(size), decoded.data(),
                    width, 0, height, format, flags) != 0) {
    fail(handle, source, "data");
  }
  const size_t pixels = static_cast<size_t>(width) * height;
  if (mode == ColorMode::kGray) {
    out.reshape(height, width, 1);
    if (cmyk_source) {
      std::vector<uint8_t> rgb(pixels * 3);
      cmyk_to_rgb(decoded.data(), rgb.data(), pixels);
      to_gray(rgb.data(), 3, out.pixels.data(), pixels);
    } else {
      to_gray(decoded.data(), channels, out.pixels.data(), pixels);
    }
    return;
  }
  out.reshape(height, width, 3);
  if (cmyk_source) {
    cmyk_to_rgb(decoded.data(), out.pixels.data(), pixels);
  } else {
    to_rgb(decoded.data(), channels, out.pixels.data(), pixels);
  }
}

}  // namespace ringloader::transforms
