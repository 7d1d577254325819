// SPDX-License-Identifier: BSD-3-Clause
// JPEG decoding of only the part a pipeline reads, through libjpeg's
// scanline API (TurboJPEG has no region decode): jpeg_crop_scanline narrows
// the columns to the iMCU columns around the box, jpeg_skip_scanlines
// entropy-decodes the rows above it without IDCT, upsampling or colour
// conversion, and decoding stops after the box's last row.
//
// Exactness: IDCT works per 8x8 block and fancy (triangle) chroma
// upsampling reads one chroma sample either side, so a pixel's value
// depends only on blocks within a few pixels of it. Edges of a cropped or
// skipped region are treated like image edges, so a margin of one iMCU
// (16 px) keeps every pixel of the box identical to the full decode
// (tests/unit/transforms/decode_region_test.cc checks this for every subsampling).
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t first

#include <jpeglib.h>

#include <algorithm>
#include <vector>

#include "ringloader/errors.h"
#include "transforms/color_convert.h"
#include "transforms/decode/decoders.h"

namespace ringloader::transforms {
namespace {

constexpr int kMargin = 16;  // rows above the box: one iMCU row of 4:2:0
// Columns either side: fancy upsampling reads one chroma sample beyond a
// pixel's own, two pixels at 2x horizontal subsampling (4:2:0, 4:2:2), and
// treats a cropped edge like the image's; IDCT is per block, which
// jpeg_crop_scanline's iMCU alignment keeps whole. (It was 16, a tenth of
// the IDCT and colour work of a typical box.)
constexpr int kColumnMargin = 2;

struct ErrorTrap {
  jpeg_error_mgr base;
  jmp_buf jump;
};

[[noreturn]] void on_error(j_common_ptr info) {
  longjmp(reinterpret_cast<ErrorTrap*>(info->err)->jump, 1);
}

// Warnings (level -1) abandon the region decode: the full decode then
// handles damaged data exactly as it always has. Trace messages are ignored.
void on_message(j_common_ptr info, int level) {
  if (level < 0) on_error(info);
}

// One decompressor per thread, reused: creating one costs more than a
// small decode.
struct Decompressor {
  jpeg_decompress_struct info{};
  ErrorTrap trap{};
  Decompressor() {
    info.err = jpeg_std_error(&trap.base);
    trap.base.error_exit = on_error;
    trap.base.emit_message = on_message;
    jpeg_create_decompress(&info);
  }
  ~Decompressor() { jpeg_destroy_decompress(&info); }
};

Decompressor& thread_decompressor() {
  thread_local Decompressor decompressor;
  return decompressor;
}

// Runs `step` (libjpeg calls only: nothing with a destructor may live in
// its frame, since an error longjmps over it). False after a libjpeg error
// or warning, with the decompressor reset for the next file.
template <class Step>
bool guarded(Decompressor& d, Step&& step) {
  if (setjmp(d.trap.jump)) {
    jpeg_abort_decompress(&d.info);
    return false;
  }
  step();
  return true;
}

// The largest libjpeg scale 1/denom (denom 1, 2, 4, 8) that keeps the box at
// least plan.min_* pixels; 1 when the plan asks for full resolution.
int scale_denominator(const RegionPlan& plan) {
  if (plan.min_height <= 0 || plan.min_width <= 0) return 1;
  int denom = 1;
  while (denom < 8 && plan.box.height / (denom * 2) >= plan.min_height &&
         plan.box.width / (denom * 2) >= plan.min_width) {
    denom *= 2;
  }
  return denom;
}

bool inside(const Box& box, int height, int width) {
  return box.top >= 0 && box.left >= 0 && box.height > 0 && box.width > 0 &&
         box.top + box.height <= height && box.left + box.width <= width;
}

// Region rows [top, bottom) and columns [left, right) in output (scaled)
// pixels, before libjpeg widens the columns to whole iMCUs.
struct Span {
  int top, bottom, left, right;
};

Span region_span(const Box& box, int denom, int out_height, int out_width) {
  auto down = [&](int v) { return v / denom; };
  auto up = [&](int v) { return (v + denom - 1) / denom; };
  return {std::max(0, down(box.top) - kMargin),
          std::min(out_height, up(box.top + box.height)),
          std::max(0, down(box.left) - kColumnMargin),
          std::min(out_width, up(box.left + box.width) + kColumnMargin)};
}

}  // namespace

bool decode_jpeg_region(const uint8_t* data, size_t size, ColorMode mode,
                        const std::string& source, Image& out, const DecodeLimits& limits,
                        const RegionPlanner& region) {
  if (ends_before_its_image(data, size)) return false;  // the full decode says why
  Decompressor& d = thread_decompressor();
  jpeg_decompress_struct* info = &d.info;
  if (!guarded(d, [&] {
        jpeg_mem_src(info, data, static_cast<unsigned long>(size));
        jpeg_read_header(info, TRUE);
      })) {
    return false;
  }
  const int height = static_cast<int>(info->image_height);
  const int width = static_cast<int>(info->image_width);
  const J_COLOR_SPACE color = info->jpeg_color_space;
  RegionPlan plan;
  bool planned = false;
  try {
    check_pixel_limit(width, height, source, limits);
    planned = color != JCS_CMYK && color != JCS_YCCK && region(height, width, plan) &&
              inside(plan.box, height, width);
  } catch (...) {
    jpeg_abort_decompress(info);
    throw;
  }
  const int denom = planned ? scale_denominator(plan) : 1;
  if (!planned || (denom == 1 && plan.box.height * plan.box.width >=
                                     static_cast<int64_t>(height) * width * 9 / 10)) {
    jpeg_abort_decompress(info);  // nearly everything is needed: decode in full
    return false;
  }
  const bool gray_source = color == JCS_GRAYSCALE;
  const bool via_rgb = mode == ColorMode::kGray && !gray_source;  // PIL's L is luma of RGB
  const int channels = mode == ColorMode::kRGB || via_rgb ? 3 : 1;
  info->out_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  info->dct_method = plan.fast ? JDCT_IFAST : JDCT_ISLOW;  // ISLOW: PIL's IDCT
  // Fast mode turns fancy upsampling off, which selects libjpeg-turbo's
  // merged upsampler for 4:2:x; that upsampler leaves a row uninitialised
  // when jpeg_skip_scanlines skips rows above the box, so the pixels then
  // depended on the previous image decoded (fast-mode output differed from
  // run to run). It is kept only where nothing is skipped.
  const bool skips_rows = plan.box.top / denom > kMargin;  // span.top > 0 below
  info->do_fancy_upsampling = plan.fast && !skips_rows ? FALSE : TRUE;
  info->scale_num = 1;
  info->scale_denom = static_cast<unsigned>(denom);
  Span span{};
  JDIMENSION left = 0, columns = 0;
  if (!guarded(d, [&] {
        jpeg_start_decompress(info);
        span = region_span(plan.box, denom, static_cast<int>(info->output_height),
                           static_cast<int>(info->output_width));
        left = static_cast<JDIMENSION>(span.left);
        columns = static_cast<JDIMENSION>(span.right - span.left);
        if (columns < info->output_width) jpeg_crop_scanline(info, &left, &columns);
        if (span.top > 0) jpeg_skip_scanlines(info, static_cast<JDIMENSION>(span.top));
      })) {
    return false;
  }
  const int rows = span.bottom - span.top;
  thread_local Image rgb;
  Image& target = via_rgb ? rgb : out;
  target.reshape(rows, static_cast<int>(columns), channels);
  if (!guarded(d, [&] {
        JSAMPROW pointers[16];
        while (info->output_scanline < static_cast<JDIMENSION>(span.bottom)) {
          const int y = static_cast<int>(info->output_scanline) - span.top;
          const int n = std::min(16, rows - y);
          for (int i = 0; i < n; ++i) pointers[i] = target.row(y + i);
          jpeg_read_scanlines(info, pointers, static_cast<JDIMENSION>(n));
        }
        jpeg_abort_decompress(info);  // the rows below the box are never decoded
      })) {
    return false;
  }
  if (via_rgb) {
    out.reshape(rows, static_cast<int>(columns), 1);
    to_gray(rgb.pixels.data(), 3, out.pixels.data(), static_cast<size_t>(rows) * columns);
  }
  out.window = {span.top, static_cast<int>(left), height, width, denom};
  return true;
}

}  // namespace ringloader::transforms
