// SPDX-License-Identifier: BSD-3-Clause
// What each op of the AutoAugment family costs natively, one thread, on
// 224x224 crops of real photos: the per-op figures behind the recipe rows of
// bench/recipes.py (which op bounds a TrivialAugmentWide / RandAugment /
// AutoAugment pipeline). Each photo is decoded and resized to 224x224 once,
// outside the timing; then every op runs at a mid-range magnitude on a copy.
//
//   ringloader-augment-bench [--filter bilinear|nearest|bicubic] [--rounds N] JPEG...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "transforms/augment_ops.h"
#include "transforms/decode/decode.h"
#include "transforms/resample.h"

using namespace ringloader::transforms;
using ringloader::ColorMode;

namespace {

std::vector<uint8_t> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The magnitudes TrivialAugmentWide's bin 15 of 31 gives (mid-range, so every
// geometric op really warps): the cost does not depend much on it.
AugmentStep step_for(AugmentOp op) {
  switch (op) {
    case AugmentOp::kShearX: case AugmentOp::kShearY: return {op, 0.49};
    case AugmentOp::kTranslateX: case AugmentOp::kTranslateY: return {op, 16.0};
    case AugmentOp::kRotate: return {op, 67.0};
    case AugmentOp::kBrightness: case AugmentOp::kColor: case AugmentOp::kContrast:
    case AugmentOp::kSharpness: return {op, 0.49};
    case AugmentOp::kPosterize: return {op, 6.0};
    case AugmentOp::kSolarize: return {op, 128.0};
    default: return {op, 0.0};
  }
}

}  // namespace

int main(int argc, char** argv) {
  WarpFilter filter = WarpFilter::kBilinear;
  int rounds = 3;
  std::vector<const char*> paths;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) {
      const std::string f = argv[++i];
      filter = f == "nearest" ? WarpFilter::kNearest
             : f == "bicubic" ? WarpFilter::kBicubic : WarpFilter::kBilinear;
    } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      paths.push_back(argv[i]);
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: %s [--filter F] [--rounds N] JPEG...\n", argv[0]);
    return 2;
  }
  std::vector<Image> crops;
  for (const char* path : paths) {
    const std::vector<uint8_t> bytes = read_file(path);
    Image decoded, crop;
    decode_image(bytes.data(), bytes.size(), ColorMode::kRGB, path, decoded);
    resample(ImageView::of(decoded), 224, 224, Interpolation::kBilinear, crop);
    crops.push_back(std::move(crop));
  }
  const AugmentWarp warp{filter, {0}};
  std::printf("| op | us per 224x224 RGB image (median of %d rounds over %zu photos) |\n",
              rounds, crops.size());
  std::printf("|---|---|\n");
  for (int o = 0; o <= static_cast<int>(AugmentOp::kInvert); ++o) {
    const AugmentOp op = static_cast<AugmentOp>(o);
    const AugmentStep step = step_for(op);
    std::vector<double> per_round;
    Image image, scratch;
    uint64_t checksum = 0;
    for (int r = 0; r < rounds; ++r) {
      double spent = 0;
      for (const Image& crop : crops) {
        image = crop;  // the copy is outside the timing
        const auto start = std::chrono::steady_clock::now();
        apply_augment_op(step, warp, image, scratch);
        spent += std::chrono::duration<double, std::micro>(
                     std::chrono::steady_clock::now() - start).count();
        checksum += image.pixels[image.pixels.size() / 2];
      }
      per_round.push_back(spent / crops.size());
    }
    std::sort(per_round.begin(), per_round.end());
    std::printf("| %s | %.1f |\n", augment_op_name(op), per_round[per_round.size() / 2]);
    if (checksum == 1) std::printf("\n");  // keeps the result live
  }
  return 0;
}
