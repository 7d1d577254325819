// SPDX-License-Identifier: BSD-3-Clause
// Pixel parity with torchvision 0.14 (PIL backend): every op, run through
// the public apply_pipeline(), against torchvision run by the reference
// script on the same files. Random ops are compared on the parameters our
// RNG drew (replayed here in the documented draw order), since parity is of
// the algorithm and the distribution, not of torch's random numbers.
#include <gtest/gtest.h>

#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "tests/unit/transforms/parity_checks.h"
#include "transforms/image_ops.h"

namespace ringloader {
namespace {

using namespace testing;  // parity_checks.h: Check, run_checks, kSeed, ...

const char* kImages[] = {"rgb.png", "portrait.png", "tiny.png", "large.jpg"};

TEST(TransformParity, ResizeMatchesPilForEveryFilterAndSize) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  const std::vector<std::vector<int>> sizes = {{24}, {224}, {31, 200}, {500, 17}, {7, 3},
                                               {1000}, {45, 67}};
  for (const char* image : kImages) {
    for (ColorMode mode : {ColorMode::kRGB, ColorMode::kGray}) {
      for (const char* filter : {"nearest", "bilinear", "bicubic"}) {
        for (const auto& size : sizes) {
          checks.push_back(deterministic(std::string("Resize/") + filter, image, mode,
                                         Pipeline{Resize(size, interpolation_from_name(filter))}));
        }
      }
    }
  }
  // max_size caps the longer side (torchvision's _compute_resized_output_size).
  Op capped = Resize(std::vector<int>{100});
  capped.params["max_size"] = 120;
  checks.push_back(deterministic("Resize/max_size", "portrait.png", ColorMode::kRGB,
                                 Pipeline{capped}));
  run_checks(checks, 0);
}

TEST(TransformParity, CentreCropWithAndWithoutPadding) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  for (const char* image : {"rgb.png", "tiny.png", "odd_420.jpg"}) {
    for (const auto& size : std::vector<std::vector<int>>{
             {10}, {11, 30}, {16}, {64}, {100, 7}, {44, 66}, {8, 16}}) {
      for (ColorMode mode : {ColorMode::kRGB, ColorMode::kGray}) {
        checks.push_back(deterministic("CenterCrop", image, mode, Pipeline{CenterCrop(size)}));
      }
    }
  }
  run_checks(checks, 0);
}

TEST(TransformParity, PaddingModesFillAndPad) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  const std::vector<std::vector<int>> paddings = {{3}, {2, 5}, {1, 2, 3, 4}, {20}};
  for (const char* mode : {"constant", "edge", "reflect", "symmetric"}) {
    for (const auto& p : paddings) {
      const std::array<int, 4> ltrb = p.size() == 1   ? std::array<int, 4>{p[0], p[0], p[0], p[0]}
                                      : p.size() == 2 ? std::array<int, 4>{p[0], p[1], p[0], p[1]}
                                                      : std::array<int, 4>{p[0], p[1], p[2], p[3]};
      // RandomCrop of the whole padded image is deterministic in torchvision.
      const std::vector<int> full = {17 + ltrb[1] + ltrb[3], 14 + ltrb[0] + ltrb[2]};
      for (ColorMode color : {ColorMode::kRGB, ColorMode::kGray}) {
        const std::vector<int> fill = color == ColorMode::kRGB ? std::vector<int>{7, 99, 200}
                                                               : std::vector<int>{7};
        Pipeline pipeline{CenterCrop(std::vector<int>{17, 14}),
                          RandomCrop(full, p, false, fill, padding_mode_from_name(mode))};
        checks.push_back(deterministic(std::string("Pad/") + mode, "rgb.png", color, pipeline));
        Op pad{"Pad", {{"padding", p}, {"fill", fill}, {"padding_mode", mode}}};
        checks.push_back(deterministic(std::string("Pad/") + mode, "tiny.png", color,
                                       Pipeline{pad, CenterCrop(std::vector<int>{9, 17})}));
      }
    }
  }
  run_checks(checks, 0);
}

TEST(TransformParity, FlipsAndTensorStages) {
  RINGLOADER_REQUIRE_REFERENCE();
  const std::vector<double> mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225};
  std::vector<Check> integer_checks, float_checks;
  for (ColorMode mode : {ColorMode::kRGB, ColorMode::kGray}) {
    const auto m = mode == ColorMode::kRGB ? mean : std::vector<double>{0.5};
    const auto s = mode == ColorMode::kRGB ? std : std::vector<double>{0.25};
    for (const char* image : {"rgb.png", "q90_420.jpg"}) {
      integer_checks.push_back(deterministic(
          "RandomHorizontalFlip", image, mode,
          Pipeline{RandomHorizontalFlip(1.0), CenterCrop(30), PILToTensor()}));
      integer_checks.push_back(deterministic(
          "RandomVerticalFlip", image, mode, Pipeline{RandomVerticalFlip(1.0), CenterCrop(30)}));
      integer_checks.push_back(deterministic(
          "NoFlip", image, mode, Pipeline{RandomHorizontalFlip(0.0), CenterCrop(31)}));
      integer_checks.push_back(
          deterministic("PILToTensor", image, mode, Pipeline{CenterCrop(30), PILToTensor()}));
      float_checks.push_back(
          deterministic("ToTensor", image, mode, Pipeline{CenterCrop(30), ToTensor()}));
      float_checks.push_back(deterministic(
          "Normalize", image, mode, Pipeline{CenterCrop({29, 31}), ToTensor(), Normalize(m, s)}));
    }
  }
  run_checks(integer_checks, 0);
  run_checks(float_checks, 1e-6);
}

// RandomResizedCrop + flip + ToTensor + Normalize, the ImageNet recipe, on
// the boxes and flips our RNG chose: draws are the box (get_params order)
// and then one uniform per flip, all from the sample's stream.
TEST(TransformParity, RandomResizedCropRecipeOnTheDrawnParameters) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  const std::vector<double> mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225};
  struct Input {
    const char* name;
    int height, width;
  };
  for (const Input image : {Input{"large.jpg", 375, 500}, Input{"portrait.png", 480, 361},
                            Input{"rgb.png", 45, 67}}) {
    for (const char* filter : {"bilinear", "bicubic", "nearest"}) {
      for (uint64_t index = 0; index < 6; ++index) {
        const std::vector<int> size = index % 2 ? std::vector<int>{224} : std::vector<int>{40, 56};
        Pipeline pipeline{RandomResizedCrop(size, {0.08, 1.0}, {3.0 / 4, 4.0 / 3},
                                                            interpolation_from_name(filter)),
                          RandomHorizontalFlip(), ToTensor(), Normalize(mean, std)};
        SampleRng rng(kSeed, 0, index);
        const auto box = transforms::random_resized_crop_box(
            image.height, image.width, {0.08, 1.0}, {3.0 / 4, 4.0 / 3}, rng);
        const bool flip = rng.bernoulli(0.5);
        nlohmann::json steps = {
            {{"fn", "resized_crop"},
             {"box", {box.top, box.left, box.height, box.width}},
             {"size", size.size() == 1 ? std::vector<int>{size[0], size[0]} : size},
             {"interpolation", filter}}};
        if (flip) steps.push_back({{"fn", "hflip"}});
        steps.push_back({{"fn", "transform"}, {"op", {{"op", "ToTensor"}}}});
        steps.push_back(
            {{"fn", "transform"}, {"op", {{"op", "Normalize"}, {"mean", mean}, {"std", std}}}});
        checks.push_back({std::string("RandomResizedCrop/") + filter, input_path(image.name),
                          ColorMode::kRGB, pipeline, steps, index});
      }
    }
  }
  run_checks(checks, 1e-6);
}

// RandomCrop with padding and pad_if_needed, on the drawn offsets: top,
// then left, from the sample's stream.
TEST(TransformParity, RandomCropOnTheDrawnOffsets) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  for (uint64_t index = 0; index < 8; ++index) {
    // rgb.png is 45 x 67; padding 4 makes it 53 x 75.
    const char* mode = index % 2 ? "reflect" : "constant";
    Pipeline pipeline{RandomCrop({32, 40}, {4}, false, {0}, padding_mode_from_name(mode))};
    SampleRng rng(kSeed, 0, index);
    const int top = static_cast<int>(rng.integer(0, 53 - 32));
    const int left = static_cast<int>(rng.integer(0, 75 - 40));
    nlohmann::json steps = {
        {{"fn", "pad"}, {"padding", {4}}, {"fill", {0}}, {"padding_mode", mode}},
        {{"fn", "crop"}, {"box", {top, left, 32, 40}}}};
    checks.push_back({"RandomCrop", input_path("rgb.png"), ColorMode::kRGB, pipeline, steps,
                      index});
    // tiny.png is 9 x 17: pad_if_needed pads width, then height, both sides.
    Pipeline needed{RandomCrop({20, 20}, {}, true, {5}, PaddingMode::kEdge)};
    SampleRng rng2(kSeed, 0, index);
    const int top2 = static_cast<int>(rng2.integer(0, 9 + 2 * 11 - 20));
    const int left2 = static_cast<int>(rng2.integer(0, 17 + 2 * 3 - 20));
    nlohmann::json steps2 = {
        {{"fn", "pad"}, {"padding", {3, 0}}, {"fill", {5}}, {"padding_mode", "edge"}},
        {{"fn", "pad"}, {"padding", {0, 11}}, {"fill", {5}}, {"padding_mode", "edge"}},
        {{"fn", "crop"}, {"box", {top2, left2, 20, 20}}}};
    checks.push_back({"RandomCrop/pad_if_needed", input_path("tiny.png"), ColorMode::kRGB,
                      needed, steps2, index});
  }
  run_checks(checks, 0);
}

}  // namespace
}  // namespace ringloader
