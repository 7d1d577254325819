// SPDX-License-Identifier: BSD-3-Clause
// Random parameters follow torchvision's rules: RandomResizedCrop boxes have
// the distribution of torchvision's get_params (reference drawn by
// torchvision itself through /usr/bin/python3), flips happen at rate p, and
// the counter RNG itself is tested in random_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "ringloader/random.h"
#include "transforms/image_ops.h"

namespace ringloader::transforms {
namespace {

struct BoxStats {
  double area = 0, log_aspect = 0, top = 0, full = 0;
};

BoxStats ours(int height, int width, int draws) {
  BoxStats s;
  for (int i = 0; i < draws; ++i) {
    SampleRng rng(7, 0, static_cast<uint64_t>(i));
    Box box = random_resized_crop_box(height, width, {0.08, 1.0}, {3.0 / 4, 4.0 / 3}, rng);
    EXPECT_GT(box.height, 0);
    EXPECT_LE(box.top + box.height, height);
    EXPECT_LE(box.left + box.width, width);
    s.area += static_cast<double>(box.height) * box.width / (height * width);
    s.log_aspect += std::log(static_cast<double>(box.width) / box.height);
    s.top += box.top;
    s.full += box.height == height && box.width == width;
  }
  s.area /= draws;
  s.log_aspect /= draws;
  s.top /= draws;
  s.full /= draws;
  return s;
}

bool torchvision_reference(int height, int width, int draws, BoxStats& s) {
  std::string command =
      "/usr/bin/python3 -c \"import torch, math, torchvision.transforms as T\n"
      "from PIL import Image\n"
      "torch.manual_seed(0); im = Image.new('RGB', (" + std::to_string(width) + ", " +
      std::to_string(height) + "))\n"
      "a = l = t = f = 0.0\n"
      "for _ in range(" + std::to_string(draws) + "):\n"
      "    i, j, h, w = T.RandomResizedCrop.get_params(im, (0.08, 1.0), (3/4, 4/3))\n"
      "    a += h * w / (" + std::to_string(height * width) + "); l += math.log(w / h); t += i\n"
      "    f += (h == " + std::to_string(height) + " and w == " + std::to_string(width) + ")\n"
      "n = " + std::to_string(draws) + "\nprint(a / n, l / n, t / n, f / n)\" 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return false;
  int read = std::fscanf(pipe, "%lf %lf %lf %lf", &s.area, &s.log_aspect, &s.top, &s.full);
  return pclose(pipe) == 0 && read == 4;
}

TEST(TransformRandom, RandomResizedCropBoxesMatchTorchvisionDistribution) {
  for (auto [height, width] : {std::pair{200, 300}, std::pair{500, 120}}) {
    BoxStats reference;
    if (!torchvision_reference(height, width, 20000, reference)) {
      GTEST_SKIP() << "/usr/bin/python3 with torchvision is not available";
    }
    BoxStats mine = ours(height, width, 20000);
    // 20000 draws: standard errors ~0.002 (area), ~0.001 (log aspect).
    EXPECT_NEAR(mine.area, reference.area, 0.01) << height << "x" << width;
    EXPECT_NEAR(mine.log_aspect, reference.log_aspect, 0.01);
    EXPECT_NEAR(mine.top, reference.top, 0.03 * height);
    EXPECT_NEAR(mine.full, reference.full, 0.01);
  }
}

TEST(TransformRandom, FallbackIsTheRatioClampedCentre) {
  // A 1000x10 strip: no try can fit, so the centre crop with ratio 3/4.
  SampleRng rng(1, 0, 0);
  Box box = random_resized_crop_box(1000, 10, {0.99, 1.0}, {3.0 / 4, 4.0 / 3}, rng);
  EXPECT_EQ(box.width, 10);
  EXPECT_EQ(box.height, 13);  // round(10 / 0.75) = 13
  EXPECT_EQ(box.top, (1000 - 13) / 2);
}

TEST(TransformRandom, FlipRateIsP) {
  auto flip = make_flip(true, 0.3);
  int flipped = 0;
  for (int i = 0; i < 20000; ++i) {
    Image image(1, 2, 1), scratch;
    image.pixels = {1, 2};
    SampleRng rng(5, 0, static_cast<uint64_t>(i));
    flip->apply(image, scratch, rng);
    flipped += image.pixels[0] == 2;
  }
  EXPECT_NEAR(flipped / 20000.0, 0.3, 0.015);  // sd 0.0032
}

}  // namespace
}  // namespace ringloader::transforms
