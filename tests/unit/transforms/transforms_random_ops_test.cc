// SPDX-License-Identifier: BSD-3-Clause
// Random parameters of the colour, geometry and erasing ops follow
// torchvision's distributions: ColorJitter's order is uniform over the 24
// permutations, factors and angles stay in their ranges with the right
// means, RandomErasing's boxes match torchvision's get_params (drawn by
// torchvision itself through /usr/bin/python3).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "ringloader/random.h"
#include "transforms/affine_ops.h"
#include "transforms/color_ops.h"
#include "transforms/random_erasing.h"

namespace ringloader::transforms {
namespace {

constexpr int kDraws = 24000;

TEST(TransformRandomOps, ColorJitterOrderIsUniformOverAll24) {
  const ColorJitterRanges ranges = {std::array<double, 2>{0.6, 1.4},
                                    std::array<double, 2>{0.6, 1.4},
                                    std::array<double, 2>{0.6, 1.4},
                                    std::array<double, 2>{-0.1, 0.1}};
  std::map<std::array<int, 4>, int> counts;
  double brightness = 0, hue = 0;
  for (int i = 0; i < kDraws; ++i) {
    SampleRng rng(3, 0, static_cast<uint64_t>(i));
    const ColorJitterDraw draw = draw_color_jitter(ranges, rng);
    ++counts[draw.order];
    ASSERT_GE(*draw.factors[kBrightness], 0.6);
    ASSERT_LE(*draw.factors[kBrightness], 1.4);
    ASSERT_GE(*draw.factors[kHue], -0.1);
    ASSERT_LE(*draw.factors[kHue], 0.1);
    brightness += *draw.factors[kBrightness];
    hue += *draw.factors[kHue];
  }
  ASSERT_EQ(counts.size(), 24u);
  // Chi-square, 23 degrees of freedom: 60 is exceeded with p ~ 4e-5.
  const double expected = kDraws / 24.0;
  double chi2 = 0;
  for (const auto& [order, n] : counts) chi2 += (n - expected) * (n - expected) / expected;
  EXPECT_LT(chi2, 60.0);
  // Uniform means: sd of the mean 0.23 / sqrt(24000) ~ 0.0015.
  EXPECT_NEAR(brightness / kDraws, 1.0, 0.006);
  EXPECT_NEAR(hue / kDraws, 0.0, 0.0015);
}

TEST(TransformRandomOps, ColorJitterSkipsUnsetAdjustments) {
  const ColorJitterRanges ranges = {std::array<double, 2>{0.5, 0.5}, std::nullopt,
                                    std::nullopt, std::nullopt};
  SampleRng rng(1, 0, 0);
  const ColorJitterDraw draw = draw_color_jitter(ranges, rng);
  EXPECT_EQ(*draw.factors[kBrightness], 0.5);
  EXPECT_FALSE(draw.factors[kContrast] || draw.factors[kSaturation] || draw.factors[kHue]);
}

TEST(TransformRandomOps, RotationAnglesAreUniformInTheRange) {
  RotationParams params;
  params.degrees = {-30, 50};
  double sum = 0;
  int below_zero = 0;
  for (int i = 0; i < kDraws; ++i) {
    SampleRng rng(4, 0, static_cast<uint64_t>(i));
    const double angle = draw_rotation_angle(params, rng);
    ASSERT_GE(angle, -30.0);
    ASSERT_LE(angle, 50.0);
    sum += angle;
    below_zero += angle < 0;
  }
  EXPECT_NEAR(sum / kDraws, 10.0, 0.5);             // sd of the mean 0.15
  EXPECT_NEAR(below_zero / double(kDraws), 0.375, 0.01);  // 30 / 80
}

TEST(TransformRandomOps, AffineTranslationsAreRoundedAndBounded) {
  AffineParams params;
  params.degrees = {-10, 10};
  params.translate = std::array<double, 2>{0.1, 0.3};
  params.scale = std::array<double, 2>{0.5, 1.5};
  params.shear = {-5, 5, 0, 20};
  double abs_tx = 0, scale = 0, shear_y = 0;
  for (int i = 0; i < kDraws; ++i) {
    SampleRng rng(5, 0, static_cast<uint64_t>(i));
    const AffineDraw draw = draw_affine(params, 100, 200, rng);  // max dx 20, dy 30
    ASSERT_LE(std::abs(draw.translate[0]), 20);
    ASSERT_LE(std::abs(draw.translate[1]), 30);
    ASSERT_GE(draw.shear[1], 0.0);
    ASSERT_LE(draw.shear[1], 20.0);
    abs_tx += std::abs(draw.translate[0]);
    scale += draw.scale;
    shear_y += draw.shear[1];
  }
  EXPECT_NEAR(abs_tx / kDraws, 10.0, 0.3);
  EXPECT_NEAR(scale / kDraws, 1.0, 0.01);
  EXPECT_NEAR(shear_y / kDraws, 10.0, 0.15);
}

struct ErasingStats {
  double erased = 0, height = 0, width = 0, top = 0;
};

ErasingStats ours(int draws) {
  ErasingParams params;
  params.p = 0.7;
  ErasingStats s;
  for (int i = 0; i < draws; ++i) {
    SampleRng rng(6, 0, static_cast<uint64_t>(i));
    const ErasingBox box = draw_erasing_box(params, 3, 60, 90, rng, nullptr);
    if (!box.erase) continue;
    EXPECT_LE(box.top + box.height, 60);
    EXPECT_LE(box.left + box.width, 90);
    s.erased += 1;
    s.height += box.height;
    s.width += box.width;
    s.top += box.top;
  }
  s.height /= s.erased;
  s.width /= s.erased;
  s.top /= s.erased;
  s.erased /= draws;
  return s;
}

bool torchvision_reference(int draws, ErasingStats& s) {
  const std::string command =
      "/usr/bin/python3 -c \"import torch, torchvision.transforms as T\n"
      "torch.manual_seed(0); t = T.RandomErasing(p=0.7); img = torch.zeros(3, 60, 90)\n"
      "e = h = w = top = 0.0\n"
      "for _ in range(" + std::to_string(draws) + "):\n"
      "    if torch.rand(1) < t.p:\n"
      "        i, j, bh, bw, v = t.get_params(img, t.scale, t.ratio, [0])\n"
      "        if bh < 60: e += 1; h += bh; w += bw; top += i\n"
      "print(e / " + std::to_string(draws) + ", h / e, w / e, top / e)\" 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return false;
  const int read = std::fscanf(pipe, "%lf %lf %lf %lf", &s.erased, &s.height, &s.width, &s.top);
  return pclose(pipe) == 0 && read == 4;
}

TEST(TransformRandomOps, ErasingBoxesMatchTorchvisionDistribution) {
  ErasingStats reference;
  if (!torchvision_reference(kDraws, reference)) {
    GTEST_SKIP() << "/usr/bin/python3 with torchvision is not available";
  }
  const ErasingStats mine = ours(kDraws);
  // Standard errors at 24000 draws: ~0.003 (rate), ~0.1 px (sides, top).
  EXPECT_NEAR(mine.erased, reference.erased, 0.015);
  EXPECT_NEAR(mine.height, reference.height, 0.6);
  EXPECT_NEAR(mine.width, reference.width, 0.8);
  EXPECT_NEAR(mine.top, reference.top, 0.6);
}

TEST(TransformRandomOps, ErasingNoiseIsStandardNormal) {
  ErasingParams params;
  params.p = 1.0;
  params.random_value = true;
  double sum = 0, squares = 0;
  size_t n = 0;
  for (int i = 0; i < 200; ++i) {
    SampleRng rng(7, 0, static_cast<uint64_t>(i));
    std::vector<float> noise;
    const ErasingBox box = draw_erasing_box(params, 3, 64, 64, rng, &noise);
    ASSERT_TRUE(box.erase);
    ASSERT_EQ(noise.size(), 3u * box.height * box.width);
    for (float v : noise) {
      sum += v;
      squares += double{v} * v;
    }
    n += noise.size();
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(squares / n, 1.0, 0.02);
}

}  // namespace
}  // namespace ringloader::transforms
