// SPDX-License-Identifier: BSD-3-Clause
// JPEG through the TurboJPEG API. Pillow decodes with libjpeg's defaults
// (accurate integer DCT, fancy upsampling); TJFLAG_ACCURATEDCT selects the
// same, so the pixels equal PIL's (both are libjpeg-turbo underneath).
#include <turbojpeg.h>

#include <memory>
#include <vector>

#include "ringloader/errors.h"
#include "transforms/color_convert.h"
#include "transforms/decode/decoders.h"

namespace ringloader::transforms {
namespace {

struct TjCloser {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using TjHandle = std::unique_ptr<void, TjCloser>;

// One decompressor per thread: creating one costs more than a small decode.
thread_local TjHandle decompressor;

tjhandle thread_decompressor() {
  if (!decompressor) decompressor.reset(tjInitDecompress());
  return decompressor.get();
}

// After a failed call TurboJPEG can leave the handle mid-stream (tables of
// the bad file, a half-read header) and fail the next, valid file: drop it.
[[noreturn]] void fail(const std::string& source, const std::string& what) {
  decompressor.reset();
  throw DecodeError("ringloader: " + source + ": " + what);
}

// Decodes into `target` (width * height * tjPixelSize[format] bytes).
// libjpeg reports damaged-but-decodable data as warnings, which PIL ignores;
// PIL does fail when the data runs out (unless LOAD_TRUNCATED_IMAGES), and
// libjpeg only warns then too, padding the image: tell the two apart.
void decompress(tjhandle handle, const uint8_t* data, size_t size, int width, int height,
                int format, uint8_t* target, const std::string& source) {
  const auto length = static_cast<unsigned long>(size);
  const int flags = TJFLAG_ACCURATEDCT;
  // Clean files (nearly all) decode once; a warning stops the decode early.
  if (tjDecompress2(handle, data, length, target, width, 0, height, format,
                    flags | TJFLAG_STOPONWARNING) == 0) {
    return;
  }
  if (tjGetErrorCode(handle) == TJERR_FATAL) {
    fail(source, std::string("corrupt JPEG data (") + tjGetErrorStr2(handle) + ")");
  }
  if (ends_before_its_image(data, size)) {
    fail(source, std::string("truncated JPEG: the data ends before the image does (") +
                     tjGetErrorStr2(handle) + ")");
  }
  if (tjDecompress2(handle, data, length, target, width, 0, height, format, flags) != 0 &&
      tjGetErrorCode(handle) == TJERR_FATAL) {
    fail(source, std::string("corrupt JPEG data (") + tjGetErrorStr2(handle) + ")");
  }
}

}  // namespace

// No end-of-image marker (FF D9) after the last start-of-scan (FF DA), or no
// scan at all. Entropy-coded data never holds FF D9 (an FF there is followed
// by 00 or RSTn), so a cut inside a scan always looks like this; a complete
// file never does.
bool ends_before_its_image(const uint8_t* data, size_t size) {
  for (size_t i = size; i >= 2; --i) {
    if (data[i - 2] != 0xFF) continue;
    if (data[i - 1] == 0xD9) return false;  // EOI seen before any later SOS
    if (data[i - 1] == 0xDA) return true;   // last SOS, no EOI after it
  }
  return true;
}

void decode_jpeg(const uint8_t* data, size_t size, ColorMode mode,
                 const std::string& source, Image& out,
                 const DecodeLimits& limits) {
  tjhandle handle = thread_decompressor();
  if (!handle) throw DecodeError("ringloader: cannot create a JPEG decoder");
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, data, static_cast<unsigned long>(size), &width,
                          &height, &subsampling, &colorspace) != 0) {
    fail(source, std::string("corrupt JPEG header (") + tjGetErrorStr2(handle) + ")");
  }
  if (width <= 0 || height <= 0) fail(source, "corrupt JPEG header (no frame size)");
  check_pixel_limit(width, height, source, limits);
  const size_t pixels = static_cast<size_t>(width) * height;
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const bool gray = colorspace == TJCS_GRAY;
  // Straight into `out` when libjpeg's conversion is PIL's: YCbCr->RGB, and
  // gray->RGB (replication). Color->L needs PIL's luma on RGB, and CMYK
  // needs PIL's cmyk2rgb, so those go through a per-thread buffer.
  if (!cmyk && (mode == ColorMode::kRGB || gray)) {
    const int channels = mode == ColorMode::kRGB ? 3 : 1;
    out.reshape(height, width, channels);
    decompress(handle, data, size, width, height, channels == 3 ? TJPF_RGB : TJPF_GRAY,
               out.pixels.data(), source);
    return;
  }
  thread_local std::vector<uint8_t> decoded;
  const int format = cmyk ? TJPF_CMYK : TJPF_RGB;
  decoded.resize(pixels * tjPixelSize[format]);
  decompress(handle, data, size, width, height, format, decoded.data(), source);
  if (cmyk && mode == ColorMode::kRGB) {
    out.reshape(height, width, 3);
    cmyk_to_rgb(decoded.data(), out.pixels.data(), pixels, /*inverted=*/true);
    return;
  }
  if (cmyk) {  // PIL has no CMYK->L: its convert goes through RGB
    thread_local std::vector<uint8_t> rgb;
    rgb.resize(pixels * 3);
    cmyk_to_rgb(decoded.data(), rgb.data(), pixels, /*inverted=*/true);
    decoded.swap(rgb);
  }
  out.reshape(height, width, 1);
  to_gray(decoded.data(), 3, out.pixels.data(), pixels);
}

}  // namespace ringloader::transforms
