// SPDX-License-Identifier: BSD-3-Clause
// ringloader-jpeg-probe: what JPEG decoding could cost for the jpeg workload
// with libjpeg-turbo's partial-decode features, measured on the benchmark's
// photographs (per-image CPU time of this thread, so other load on the
// machine does not inflate it). A tool for deciding what to optimize; it
// uses libjpeg directly, not ringloader.
//
//   ringloader-jpeg-probe [--limit 400] FILE.jpg...
//
// For each image it draws a RandomResizedCrop(224) box the way torchvision
// does (scale 0.08..1, log-uniform ratio 3/4..4/3, 10 tries, centre-crop
// fallback) and measures:
//   full        decode every pixel to RGB (JDCT_ISLOW, fancy upsampling):
//               what PIL does and what ringloader does today
//   entropy     jpeg_skip_scanlines over the whole image: Huffman decoding
//               only (no IDCT, upsampling or colour conversion)
//   roi         decode only the crop box: jpeg_crop_scanline to the box's
//               columns, jpeg_skip_scanlines to its top row, read its rows,
//               then stop (rows below the box are never entropy-decoded)
//   roi_entropy jpeg_skip_scanlines down to the box's last row: the Huffman
//               decoding that any exact decoder of the box must do, since a
//               baseline JPEG without restart markers can only be entropy-
//               decoded from its first row (the floor under roi)
//   header      jpeg_read_header alone (markers, tables)
//   half        the full image at 1/2 scale (DCT-domain scaling), for boxes
//               at least 2 x 224 on both sides; PIL's draft() does this
// and checks that roi's pixels equal full's pixels inside the box.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <jpeglib.h>  // after <cstdio>: it needs size_t and FILE

#include "spread_files.h"

namespace {

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct ErrorManager {
  jpeg_error_mgr base;
  jmp_buf jump;
};

void on_error(j_common_ptr cinfo) {
  longjmp(reinterpret_cast<ErrorManager*>(cinfo->err)->jump, 1);
}

struct Box {
  int top, left, height, width;
};

// torchvision.transforms.RandomResizedCrop.get_params, with std::mt19937.
Box rrc_box(int height, int width, std::mt19937& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    double target = area * (0.08 + unit(rng) * (1.0 - 0.08));
    double ratio = std::exp(log_lo + unit(rng) * (log_hi - log_lo));
    int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      int top = std::uniform_int_distribution<int>(0, height - h)(rng);
      int left = std::uniform_int_distribution<int>(0, width - w)(rng);
      return {top, left, h, w};
    }
  }
  double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < 3.0 / 4.0) {
    h = static_cast<int>(std::lround(w / (3.0 / 4.0)));
  } else if (in_ratio > 4.0 / 3.0) {
    w = static_cast<int>(std::lround(h * (4.0 / 3.0)));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

enum class Mode { kFull, kEntropy, kRoi, kHalf, kRoiEntropy, kHeader };

// Decodes `data` per `mode`; fills `out` (RGB rows of the box for kRoi, the
// whole image otherwise) and returns false on a libjpeg error.
bool decode(const std::vector<unsigned char>& data, Mode mode, const Box& box,
            std::vector<unsigned char>& out, int& out_left) {
  jpeg_decompress_struct cinfo;
  ErrorManager error;
  cinfo.err = jpeg_std_error(&error.base);
  error.base.error_exit = on_error;
  if (setjmp(error.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data.data(), data.size());
  jpeg_read_header(&cinfo, TRUE);
  if (mode == Mode::kHeader) {
    jpeg_destroy_decompress(&cinfo);
    return true;
  }
  cinfo.out_color_space = JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  if (mode == Mode::kHalf) {
    cinfo.scale_num = 1;
    cinfo.scale_denom = 2;
  }
  jpeg_start_decompress(&cinfo);
  const int width = cinfo.output_width, height = cinfo.output_height;
  out_left = 0;
  if (mode == Mode::kEntropy || mode == Mode::kRoiEntropy) {
    // Skipping to the very end returns at once, so skip all but the last
    // row and read that one (a single iMCU row is fully decoded).
    const int last = mode == Mode::kEntropy ? height : box.top + box.height;
    out.resize(static_cast<size_t>(width) * 3);
    jpeg_skip_scanlines(&cinfo, last - 1);
    JSAMPROW row = out.data();
    jpeg_read_scanlines(&cinfo, &row, 1);
    jpeg_abort_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return true;
  }
  JDIMENSION first_row = 0, rows = height;
  JDIMENSION x = 0, w = width;
  if (mode == Mode::kRoi) {
    // A margin of one iMCU (16 px) around the box keeps its pixels away
    // from the edges of the decoded region, where chroma upsampling would
    // otherwise replicate instead of interpolating.
    const int margin = 16;
    const int x0 = std::max(0, box.left - margin);
    const int x1 = std::min(width, box.left + box.width + margin);
    x = x0;
    w = x1 - x0;
    jpeg_crop_scanline(&cinfo, &x, &w);  // widens to iMCU boundaries
    out_left = box.left - static_cast<int>(x);
    const int skip = std::max(0, box.top - margin);
    if (skip > 0) jpeg_skip_scanlines(&cinfo, skip);
    first_row = skip;
    rows = box.top + box.height - skip;
  }
  const size_t stride = static_cast<size_t>(cinfo.output_width) * 3;
  out.resize(stride * rows);
  while (cinfo.output_scanline < first_row + rows) {
    JSAMPROW row = out.data() + (cinfo.output_scanline - first_row) * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  if (mode == Mode::kRoi && cinfo.output_scanline < cinfo.output_height) {
    jpeg_abort_decompress(&cinfo);  // the rest is never decoded
  } else {
    jpeg_finish_decompress(&cinfo);
  }
  jpeg_destroy_decompress(&cinfo);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const auto encoded = ringloader::bench::read_spread_files(
      argc, argv, "ringloader-jpeg-probe [--limit N] FILE.jpg...");
  // Image sizes and boxes, drawn once so every mode sees the same boxes.
  std::mt19937 rng(0);
  std::vector<Box> boxes;
  std::vector<std::pair<int, int>> sizes;
  for (const auto& data : encoded) {
    jpeg_decompress_struct cinfo;
    jpeg_error_mgr err;
    cinfo.err = jpeg_std_error(&err);
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data.data(), data.size());
    jpeg_read_header(&cinfo, TRUE);
    sizes.emplace_back(cinfo.image_height, cinfo.image_width);
    boxes.push_back(rrc_box(cinfo.image_height, cinfo.image_width, rng));
    jpeg_destroy_decompress(&cinfo);
  }
  std::vector<unsigned char> out, full;
  double seconds[6] = {0, 0, 0, 0, 0, 0};
  int half_eligible = 0;
  double box_area = 0;
  double bytes = 0;
  for (const auto& data : encoded) bytes += static_cast<double>(data.size());
  long mismatched = 0;
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms up
    for (size_t i = 0; i < encoded.size(); ++i) {
      int left = 0;
      for (Mode mode : {Mode::kFull, Mode::kEntropy, Mode::kRoi, Mode::kRoiEntropy,
                        Mode::kHeader}) {
        const double start = thread_cpu_s();
        if (!decode(encoded[i], mode, boxes[i], out, left)) {
          std::fprintf(stderr, "decode failed: image %zu\n", i);
          return 1;
        }
        const double elapsed = thread_cpu_s() - start;
        if (pass == 1) seconds[static_cast<int>(mode)] += elapsed;
        if (mode == Mode::kFull) full = out;
        if (mode == Mode::kRoi && pass == 1) {
          // roi rows vs the same pixels of the full decode
          const Box& b = boxes[i];
          const size_t full_stride = static_cast<size_t>(sizes[i].second) * 3;
          const int roi_top = std::max(0, b.top - 16);
          const size_t roi_stride = out.size() / (b.top + b.height - roi_top);
          for (int y = 0; y < b.height; ++y) {
            const unsigned char* a = full.data() + (b.top + y) * full_stride + b.left * 3;
            const unsigned char* r =
                out.data() + (b.top - roi_top + y) * roi_stride + left * 3;
            for (int k = 0; k < b.width * 3; ++k) mismatched += a[k] != r[k];
          }
        }
      }
      const Box& b = boxes[i];
      if (pass == 1) {
        box_area += static_cast<double>(b.height) * b.width /
                    (static_cast<double>(sizes[i].first) * sizes[i].second);
      }
      if (b.height >= 448 && b.width >= 448) {
        const double start = thread_cpu_s();
        decode(encoded[i], Mode::kHalf, b, out, left);
        if (pass == 1) {
          seconds[3] += thread_cpu_s() - start;
          ++half_eligible;
        }
      }
    }
  }
  const double n = static_cast<double>(encoded.size());
  std::printf(
      "{\"workload\": \"jpeg-probe\", \"images\": %zu, \"mean_box_area_fraction\": %.3f, "
      "\"cpu_us_per_image\": {\"full\": %.1f, \"entropy_only\": %.1f, \"roi\": %.1f, "
      "\"roi_entropy\": %.1f, \"header\": %.1f}, \"mean_bytes\": %.0f, "
      "\"half_scale_eligible\": %d, \"half_scale_us_per_eligible_image\": %.1f, "
      "\"roi_pixels_differing_from_full\": %ld}\n",
      encoded.size(), box_area / n, seconds[0] / n * 1e6, seconds[1] / n * 1e6,
      seconds[2] / n * 1e6, seconds[4] / n * 1e6, seconds[5] / n * 1e6, bytes / n,
      half_eligible,
      half_eligible ? seconds[3] / half_eligible * 1e6 : 0.0, mismatched);
  return 0;
}
