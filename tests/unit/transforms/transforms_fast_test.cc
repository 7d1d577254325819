// SPDX-License-Identifier: BSD-3-Clause
// PipelineMode::kFast: chosen as data ({"mode": "fast", "ops": [...]}),
// validated at construction, same output shape and random draws as exact
// mode, pixels close to exact mode's (PSNR), and the flip fused into the
// tensor write equal to the flip op.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>
#include <random>
#include <vector>

#include "ringloader/errors.h"
#include "ringloader/transforms.h"

namespace ringloader {
namespace {

// A smooth photo-like card (fast mode is judged on photos, not on noise).
std::vector<uint8_t> photo_jpeg(int height, int width) {
  std::vector<uint8_t> rgb(static_cast<size_t>(height) * width * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(128 + 100 * std::sin(x * 0.03) * std::cos(y * 0.02));
      p[1] = static_cast<uint8_t>(128 + 90 * std::sin((x + y) * 0.015));
      p[2] = static_cast<uint8_t>((x / 40 + y / 40) % 2 ? 190 : 60);
    }
  }
  tjhandle handle = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  tjCompress2(handle, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_420, 90,
              0);
  std::vector<uint8_t> out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(handle);
  return out;
}

double psnr(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double squared = 0;
  for (size_t i = 0; i < a.size(); ++i) squared += (a[i] - b[i]) * double(a[i] - b[i]);
  const double mse = squared / a.size();
  return mse == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 / mse);
}

Pipeline fast(Pipeline pipeline) { return pipeline.set_mode(PipelineMode::kFast); }

TEST(TransformFast, ModeIsDataAndValidated) {
  const Pipeline exact{RandomResizedCrop(224), ToTensor()};
  EXPECT_TRUE(exact.to_json().is_array());
  const auto description = fast(exact).to_json();
  ASSERT_TRUE(description.is_object());
  EXPECT_EQ(description["mode"], "fast");
  EXPECT_EQ(Pipeline::from_json(description).mode(), PipelineMode::kFast);
  EXPECT_EQ(Pipeline::from_json(description).ops().size(), 2u);
  EXPECT_EQ(Pipeline::from_json({{"mode", "exact"}, {"ops", exact.to_json()}}).mode(),
            PipelineMode::kExact);
  EXPECT_THROW(Pipeline::from_json({{"mode", "quick"}, {"ops", exact.to_json()}}), OptionError);
  EXPECT_THROW(Pipeline::from_json({{"mode", "fast"}, {"opz", exact.to_json()}}), OptionError);
  EXPECT_THROW(Pipeline::from_json({{"mode", "fast"}}), OptionError);
  // Parameters are checked in fast mode too, naming op and parameter.
  try {
    fast(Pipeline{RandomResizedCrop(std::vector<int>{224}, {0.9, 0.1})}).output_shape(
        ColorMode::kRGB);
    FAIL() << "no OptionError";
  } catch (const OptionError& error) {
    EXPECT_NE(std::string(error.what()).find("scale"), std::string::npos) << error.what();
  }
  EXPECT_EQ(fast(Pipeline{RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor()})
                .output_shape(ColorMode::kRGB),
            (Pipeline{RandomResizedCrop(224), ToTensor()}.output_shape(ColorMode::kRGB)));
}

TEST(TransformFast, CloseToExactMode) {
  const auto jpeg = photo_jpeg(600, 800);  // boxes >= 2x the output: DCT scaling
  for (const Pipeline& pipeline :
       {Pipeline{RandomResizedCrop(224), RandomHorizontalFlip()},
        Pipeline{RandomResizedCrop(std::vector<int>{64, 96}, {0.5, 1.0})},
        Pipeline{Resize(256), CenterCrop(224)}}) {
    double worst = 99;
    for (uint64_t index = 0; index < 30; ++index) {
      const auto exact = apply_pipeline(pipeline, jpeg, ColorMode::kRGB, 1, 0, index);
      const auto quick = apply_pipeline(fast(pipeline), jpeg, ColorMode::kRGB, 1, 0, index);
      ASSERT_EQ(exact.shape, quick.shape);
      worst = std::min(worst, psnr(exact.bytes, quick.bytes));
    }
    // Hard-edged checkerboard: the worst case for unfiltered shrinking.
    EXPECT_GT(worst, 24.0) << pipeline.to_json().dump();
    EXPECT_LT(worst, 99.0) << "fast mode computed the exact pixels: did it run?";
  }
}

TEST(TransformFast, FusedFlipEqualsTheFlipOp) {
  const auto jpeg = photo_jpeg(300, 400);
  // With a tensor op the flip is fused into the write; without, it runs as
  // an op. Same draws, so the same pixels (CHW vs HWC).
  const Pipeline fused = fast(Pipeline{RandomResizedCrop(96), RandomHorizontalFlip(), PILToTensor()});
  const Pipeline op = fast(Pipeline{RandomResizedCrop(96), RandomHorizontalFlip()});
  int flipped_differently = 0;
  for (uint64_t index = 0; index < 20; ++index) {
    const auto chw = apply_pipeline(fused, jpeg, ColorMode::kRGB, 4, 0, index).bytes;
    const auto hwc = apply_pipeline(op, jpeg, ColorMode::kRGB, 4, 0, index).bytes;
    const size_t plane = 96 * 96;
    for (size_t i = 0; i < plane; ++i) {
      for (size_t c = 0; c < 3; ++c) ASSERT_EQ(chw[c * plane + i], hwc[i * 3 + c]);
    }
    const auto unflipped =
        apply_pipeline(fast(Pipeline{RandomResizedCrop(96)}), jpeg, ColorMode::kRGB, 4, 0, index);
    flipped_differently += unflipped.bytes != hwc;
  }
  EXPECT_GT(flipped_differently, 3);  // some samples were flipped
  EXPECT_LT(flipped_differently, 17);  // and some were not
}

}  // namespace
}  // namespace ringloader
