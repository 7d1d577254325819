// SPDX-License-Identifier: BSD-3-Clause
// The tensor stage's uint8 RGB planes (PILToTensor, timm's prefetcher
// path): the AVX2 blocks of 16 pixels, mirrored or not, give the bytes of a
// plain per-value transpose, for widths around the block size.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace ringloader::transforms
