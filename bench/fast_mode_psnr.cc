// SPDX-License-Identifier: BSD-3-Clause
// ringloader-fast-psnr: how far PipelineMode::kFast is from kExact (which
// is torchvision's pixels), and what each costs, on the benchmark photos.
// One thread, no loader: apply_pipeline() per image, same seed and index
// for both modes, so both crop the same box and flip the same way.
//
//   ringloader-fast-psnr [--limit 400] FILE.jpg...
//
// Prints one JSON line: PSNR of fast vs exact over the uint8 output of
// RandomResizedCrop(224) + RandomHorizontalFlip (mean, min, 5th
// percentile), the max abs difference, and CPU µs per image of the whole
// benchmark pipeline (+ ToTensor + Normalize) in each mode.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ringloader/transforms.h>

#include "spread_files.h"

namespace {

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double psnr(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int& max_diff) {
  double squared = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int d = a[i] - b[i];
    squared += d * d;
    max_diff = std::max(max_diff, std::abs(d));
  }
  const double mse = squared / a.size();
  return mse == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 / mse);
}

double cpu_us_per_image(const ringloader::Pipeline& pipeline,
                        const std::vector<std::vector<uint8_t>>& images, double& sink) {
  const double start = thread_cpu_s();
  for (size_t i = 0; i < images.size(); ++i) {
    sink += ringloader::apply_pipeline(pipeline, images[i], ringloader::ColorMode::kRGB, 0, 1, i)
                .bytes[0];
  }
  return (thread_cpu_s() - start) / images.size() * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  const auto images = ringloader::bench::read_spread_files(
      argc, argv, "ringloader-fast-psnr [--limit N] FILE.jpg...");
  using namespace ringloader;
  const Pipeline exact_crop{RandomResizedCrop(224), RandomHorizontalFlip()};
  Pipeline fast_crop = exact_crop;
  fast_crop.set_mode(PipelineMode::kFast);
  std::vector<double> values;
  int max_diff = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const auto a = apply_pipeline(exact_crop, images[i], ColorMode::kRGB, 0, 1, i);
    const auto b = apply_pipeline(fast_crop, images[i], ColorMode::kRGB, 0, 1, i);
    values.push_back(psnr(a.bytes, b.bytes, max_diff));
  }
  std::sort(values.begin(), values.end());
  double mean = 0;
  for (double v : values) mean += v / values.size();
  Pipeline exact_full{RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
                      Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})};
  Pipeline fast_full = exact_full;
  fast_full.set_mode(PipelineMode::kFast);
  double sink = 0;
  cpu_us_per_image(fast_full, images, sink);  // warm-up
  const double exact_us = cpu_us_per_image(exact_full, images, sink);
  const double fast_us = cpu_us_per_image(fast_full, images, sink);
  std::printf(
      "{\"workload\": \"fast-psnr\", \"images\": %zu, \"psnr_db\": {\"mean\": %.2f, "
      "\"min\": %.2f, \"p5\": %.2f, \"median\": %.2f}, \"max_abs_diff\": %d, "
      "\"cpu_us_per_image\": {\"exact\": %.1f, \"fast\": %.1f}, \"sink\": %.1f}\n",
      images.size(), mean, values.front(), values[values.size() / 20],
      values[values.size() / 2], max_diff, exact_us, fast_us, sink);
  return 0;
}
