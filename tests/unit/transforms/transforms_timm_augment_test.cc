// SPDX-License-Identifier: BSD-3-Clause
// timm's RandAugment (transforms/timm_augment.h): the draws follow timm's
// forward pass (ops uniform with replacement, probability per op, clamped
// magnitude noise, signs and filters evenly), its levels are timm's, and a
// 0-bit posterize gives Pillow 12's black image. Pixel parity against timm
// itself is python/tests/test_timm_transforms.py.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "ringloader/random.h"
#include "transforms/timm_augment.h"

namespace ringloader::transforms {
namespace {

constexpr int kSamples = 20000;

TimmAugmentParams params_for(std::vector<TimmOp> ops, double magnitude, double std) {
  TimmAugmentParams p;
  p.ops = std::move(ops);
  p.magnitude = magnitude;
  p.magnitude_std = std;
  p.warp.fill = {124, 116, 104};
  return p;
}

TEST(TimmAugment, OpsUniformProbabilityHalfFiltersEven) {
  TimmAugmentParams p = params_for({TimmOp::kRotate, TimmOp::kEqualize}, 9, 0);
  std::map<std::string, int> filters;
  int steps = 0, rotations = 0, negative = 0;
  for (int i = 0; i < kSamples; ++i) {
    SampleRng rng(1, 0, static_cast<uint64_t>(i));
    for (const TimmStep& s : draw_timm_augment(p, rng)) {
      ++steps;
      if (s.op != TimmOp::kRotate) continue;
      ++rotations;
      negative += s.arg < 0;
      EXPECT_DOUBLE_EQ(std::fabs(s.arg), 9 / 10.0 * 30.0);  // timm's level * 30
      ++filters[s.filter == WarpFilter::kBilinear ? "bilinear" : "bicubic"];
    }
  }
  // Two layers, each applied with p = 0.5: one step per sample on average.
  EXPECT_NEAR(steps / static_cast<double>(kSamples), 1.0, 0.03);
  EXPECT_NEAR(rotations / static_cast<double>(steps), 0.5, 0.02);
  EXPECT_NEAR(negative / static_cast<double>(rotations), 0.5, 0.03);
  EXPECT_NEAR(filters["bilinear"] / static_cast<double>(rotations), 0.5, 0.03);
}

TEST(TimmAugment, MagnitudeNoiseIsClampedAtTen) {
  TimmAugmentParams p = params_for({TimmOp::kPosterizeIncreasing}, 9, 0.5);
  p.prob = 1.0;
  p.num_layers = 1;
  int zero_bits = 0;
  double sum = 0;
  for (int i = 0; i < kSamples; ++i) {
    SampleRng rng(2, 0, static_cast<uint64_t>(i));
    const TimmStep s = draw_timm_augment(p, rng).at(0);
    ASSERT_LE(s.magnitude, 10.0);
    sum += s.magnitude;
    // 4 - int(m / 10 * 4): 0 bits only at the clamp (m = 10).
    EXPECT_EQ(s.arg, 4 - static_cast<int>(s.magnitude / 10 * 4));
    zero_bits += s.arg == 0;
  }
  // P(N(9, 0.5) >= 10) = 0.0228.
  EXPECT_NEAR(zero_bits / static_cast<double>(kSamples), 0.0228, 0.004);
  EXPECT_NEAR(sum / kSamples, 9.0 - 0.5 * 0.0085, 0.02);
}

TEST(TimmAugment, ZeroBitPosterizeIsBlack) {
  TimmAugmentParams p = params_for({TimmOp::kPosterizeIncreasing}, 10, 0);
  Image image, scratch;
  image.reshape(4, 5, 3);
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(i * 9);
  apply_timm_step(p, {TimmOp::kPosterizeIncreasing, 10, 0}, image, scratch);
  for (uint8_t v : image.pixels) EXPECT_EQ(v, 0);
  // magnitude 1e6 asks for 4 - 400000 bits: still black, no shift past 31.
  image.pixels.assign(image.pixels.size(), 200);
  apply_timm_step(p, {TimmOp::kPosterizeIncreasing, 1e6, 4 - 400000}, image, scratch);
  for (uint8_t v : image.pixels) EXPECT_EQ(v, 0);
}

TEST(TimmAugment, SolarizeAddAddsBelowThreshold) {
  TimmAugmentParams p = params_for({TimmOp::kSolarizeAdd}, 10, 0);
  Image image, scratch;
  image.reshape(1, 3, 1);
  image.pixels = {100, 127, 200};
  apply_timm_step(p, {TimmOp::kSolarizeAdd, 10, 110}, image, scratch);
  EXPECT_EQ(image.pixels, (std::vector<uint8_t>{210, 237, 200}));
}

}  // namespace
}  // namespace ringloader::transforms
