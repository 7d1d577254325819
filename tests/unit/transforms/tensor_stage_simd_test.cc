// SPDX-License-Identifier: BSD-3-Clause
// Byte moves with AVX2 blocks: the tensor stage's uint8 RGB planes
// (PILToTensor, timm's prefetcher path; blocks of 16 pixels, mirrored or
// not) give the bytes of a plain per-value transpose, and the
// RandomHorizontalFlip op's RGB rows (blocks of 5 pixels) those of a
// per-pixel mirror, for widths around the block sizes.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "transforms/compiled_pipeline.h"
#include "transforms/resample_kernels.h"
#include "transforms/tensor_stage.h"

namespace ringloader::transforms {
namespace {

std::vector<uint8_t> planes_by_hand(const Image& in, bool mirror) {
  const size_t plane = static_cast<size_t>(in.height) * in.width;
  std::vector<uint8_t> out(3 * plane);
  for (int y = 0; y < in.height; ++y) {
    for (int x = 0; x < in.width; ++x) {
      const int source = mirror ? in.width - 1 - x : x;
      for (int c = 0; c < 3; ++c) {
        out[c * plane + static_cast<size_t>(y) * in.width + x] = in.row(y)[3 * source + c];
      }
    }
  }
  return out;
}

TEST(TensorStageSimd, ByteplanesEqualThePerValueTranspose) {
  std::mt19937 rng(3);
  const TensorWriter writer(DType::kUInt8, Layout::kCHW, 3, {}, {});
  int compared = 0;
  for (int width : {1, 15, 16, 17, 31, 33, 224}) {
    Image in(5, width, 3);
    for (auto& p : in.pixels) p = static_cast<uint8_t>(rng());
    for (bool mirror : {false, true}) {
      const std::vector<uint8_t> expected = planes_by_hand(in, mirror);
      for (bool simd : {true, false}) {
        SCOPED_TRACE("width " + std::to_string(width) + (mirror ? " mirrored" : "") +
                     (simd ? " simd" : " portable"));
        allow_simd(simd);
        std::vector<uint8_t> out(expected.size());
        writer.write(in, out.data(), mirror);
        allow_simd(true);
        ASSERT_EQ(out, expected);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 28);
}

TEST(TensorStageSimd, FlipOpEqualsThePerPixelMirror) {
  std::mt19937 rng(4);
  int compared = 0;
  for (int width : {1, 5, 6, 7, 10, 11, 12, 16, 33, 224}) {
    Image in(3, width, 3);
    for (auto& p : in.pixels) p = static_cast<uint8_t>(rng());
    std::vector<uint8_t> expected(in.pixels.size());
    for (int y = 0; y < 3; ++y) {
      for (int x = 0; x < width; ++x) {
        for (int c = 0; c < 3; ++c) {
          expected[(static_cast<size_t>(y) * width + x) * 3 + c] = in.row(y)[3 * (width - 1 - x) + c];
        }
      }
    }
    const CompiledPipeline flip(Pipeline{RandomHorizontalFlip(1.0)}, ColorMode::kRGB, 3, width);
    for (bool simd : {true, false}) {
      SCOPED_TRACE("width " + std::to_string(width) + (simd ? " simd" : " portable"));
      allow_simd(simd);
      Image image = in, scratch;
      SampleRng sample(1, 0, 0);
      std::vector<uint8_t> out(expected.size());
      flip.run(image, scratch, sample, out.data());
      allow_simd(true);
      ASSERT_EQ(out, expected);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 20);
}

}  // namespace
}  // namespace ringloader::transforms
