// SPDX-License-Identifier: BSD-3-Clause
// Pixel parity with torchvision 0.14 (PIL backend) for the colour, blur,
// rotation/affine and erasing ops. Fixed ranges ((f, f) factors, angles,
// sigmas) make torchvision's transform itself deterministic; otherwise the
// parameters our RNG drew are replayed into torchvision's functionals.
#include <gtest/gtest.h>

#include <cstring>

#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "tests/unit/transforms/parity_checks.h"
#include "transforms/affine_ops.h"
#include "transforms/color_adjust.h"
#include "transforms/color_ops.h"
#include "transforms/random_erasing.h"

namespace ringloader {
namespace {

using namespace testing;  // parity_checks.h: Check, run_checks, kSeed, ...

const char* kImages[] = {"rgb.png", "portrait.png", "tiny.png", "large.jpg", "odd_420.jpg"};
const ColorMode kModes[] = {ColorMode::kRGB, ColorMode::kGray};

std::pair<double, double> fixed(double v) { return {v, v}; }

// Pillow's Convert.c HSV conversions, on 2^20 triples covering every value
// of each byte (every residue mod 16 of the 24-bit code).
TEST(TransformParityOps, HsvConversionsMatchPillow) {
  RINGLOADER_REQUIRE_REFERENCE();
  const std::string dir = testing::scratch_dir() + "/hsv";
  ASSERT_EQ(testing::run_python("hsv " + dir), 0);
  const auto rgb = testing::read_bytes(dir + "/rgb_from_hsv.bin");
  const auto hsv = testing::read_bytes(dir + "/hsv_from_rgb.bin");
  ASSERT_EQ(rgb.size(), 3u << 20);
  ASSERT_EQ(hsv.size(), 3u << 20);
  size_t differing_rgb = 0, differing_hsv = 0;
  for (uint32_t i = 0; i < (1u << 20); ++i) {
    const uint32_t code = i * 16 + i % 16;
    const uint8_t in[3] = {uint8_t(code >> 16), uint8_t(code >> 8), uint8_t(code)};
    uint8_t out[3];
    transforms::hsv_to_rgb(in, out);
    differing_rgb += std::memcmp(out, &rgb[3 * i], 3) != 0;
    transforms::rgb_to_hsv(in, out);
    differing_hsv += std::memcmp(out, &hsv[3 * i], 3) != 0;
  }
  EXPECT_EQ(differing_rgb, 0u);
  EXPECT_EQ(differing_hsv, 0u);
}

TEST(TransformParityOps, EachColorAdjustmentMatchesPil) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  const std::pair<double, double> none{1, 1}, no_hue{0, 0};
  for (const char* image : kImages) {
    for (ColorMode mode : kModes) {
      for (double f : {0.0, 0.3, 0.77, 1.5, 2.6}) {
        checks.push_back(deterministic("brightness", image, mode,
                                       Pipeline{ColorJitter(fixed(f), none, none, no_hue)}));
        checks.push_back(deterministic("contrast", image, mode,
                                       Pipeline{ColorJitter(none, fixed(f), none, no_hue)}));
        checks.push_back(deterministic("saturation", image, mode,
                                       Pipeline{ColorJitter(none, none, fixed(f), no_hue)}));
      }
      for (double h : {-0.5, -0.27, -0.1, -0.001, 0.05, 0.33, 0.5}) {
        checks.push_back(deterministic("hue", image, mode,
                                       Pipeline{ColorJitter(none, none, none, fixed(h))}));
      }
    }
  }
  run_checks(checks, 0);
}

// ColorJitter(0.4, 0.4, 0.4, 0.1) on the order and factors our RNG drew.
TEST(TransformParityOps, ColorJitterOnTheDrawnOrderAndFactors) {
  RINGLOADER_REQUIRE_REFERENCE();
  const char* names[] = {"adjust_brightness", "adjust_contrast", "adjust_saturation",
                         "adjust_hue"};
  std::vector<Check> checks;
  for (const char* image : {"rgb.png", "large.jpg", "portrait.png"}) {
    for (ColorMode mode : kModes) {
      for (uint64_t index = 0; index < 8; ++index) {
        Pipeline pipeline{ColorJitter(0.4, 0.4, 0.4, 0.1), ToTensor()};
        SampleRng rng(kSeed, 0, index);
        const auto draw = transforms::draw_color_jitter(
            {std::array<double, 2>{0.6, 1.4}, std::array<double, 2>{0.6, 1.4},
             std::array<double, 2>{0.6, 1.4}, std::array<double, 2>{-0.1, 0.1}},
            rng);
        nlohmann::json steps = nlohmann::json::array();
        for (int fn : draw.order) {
          steps.push_back({{"fn", names[fn]}, {"factor", *draw.factors[fn]}});
        }
        steps.push_back({{"fn", "transform"}, {"op", {{"op", "ToTensor"}}}});
        checks.push_back({"ColorJitter", input_path(image), mode, pipeline, steps, index});
      }
    }
  }
  run_checks(checks, 0);
}

TEST(TransformParityOps, GrayscaleChangesTheChannelCount) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  for (const char* image : {"rgb.png", "odd_420.jpg", "gray.png"}) {
    for (ColorMode mode : kModes) {
      checks.push_back(deterministic("Grayscale", image, mode, Pipeline{Grayscale(1)}));
      checks.push_back(deterministic("Grayscale", image, mode,
                                     Pipeline{Grayscale(3), CenterCrop(20), PILToTensor()}));
      checks.push_back(deterministic("RandomGrayscale", image, mode,
                                     Pipeline{RandomGrayscale(1.0)}));
      checks.push_back(deterministic("RandomGrayscale", image, mode,
                                     Pipeline{RandomGrayscale(0.0)}));
    }
  }
  run_checks(checks, 0);
  // 1 channel out, then a 1-channel Normalize: the shape follows Grayscale.
  std::vector<Check> normalized = {deterministic(
      "Grayscale+Normalize", "rgb.png", ColorMode::kRGB,
      Pipeline{Grayscale(1), ToTensor(), Normalize({0.5}, {0.25})})};
  run_checks(normalized, 1e-6);
}

TEST(TransformParityOps, GaussianBlurWithinOneOfTorch) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  const std::vector<std::vector<int>> kernels = {{3}, {5}, {3, 7}, {9, 5}, {23}};
  for (const char* image : {"rgb.png", "portrait.png", "large.jpg", "odd_420.jpg"}) {
    for (ColorMode mode : kModes) {
      for (const auto& kernel : kernels) {
        for (double sigma : {0.1, 0.8, 1.5, 3.7}) {
          checks.push_back(deterministic("GaussianBlur", image, mode,
                                         Pipeline{GaussianBlur(kernel, fixed(sigma))}));
        }
      }
    }
  }
  const auto agreement = run_checks(checks, 1);
  // Only values torch's float32 sums put within ~1e-5 of .5 may differ.
  const auto& blur = agreement.at("GaussianBlur");
  EXPECT_LT(blur.differing * 10000, blur.values) << blur.differing << " of " << blur.values;
}

TEST(TransformParityOps, RotationMatchesPil) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  const std::vector<std::vector<double>> centers = {{}, {3, 7}, {10.5, 20}};
  for (const char* image : {"rgb.png", "portrait.png", "tiny.png", "odd_420.jpg"}) {
    for (ColorMode mode : kModes) {
      const std::vector<int> fill = mode == ColorMode::kRGB ? std::vector<int>{10, 200, 30}
                                                            : std::vector<int>{77};
      for (double angle : {0.0, 90.0, 180.0, 270.0, -90.0, 30.0, -45.5, 12.3, 200.0, 359.9}) {
        for (const char* filter : {"nearest", "bilinear", "bicubic"}) {
          for (const auto& center : centers) {
            for (bool expand : {false, true}) {
              checks.push_back(deterministic(
                  std::string("RandomRotation/") + filter, image, mode,
                  Pipeline{RandomRotation(fixed(angle), interpolation_from_name(filter), expand, center,
                                          center.empty() ? std::vector<int>{0} : fill)}));
            }
          }
        }
      }
    }
  }
  run_checks(checks, 0);
}

TEST(TransformParityOps, AffineWithFixedRangesMatchesPil) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  struct Case {
    double angle, scale;
    std::vector<double> shear;
  };
  const Case cases[] = {{0, 1, {}},        {0, 1.7, {}},          {0, 0.6, {}},
                        {25, 1, {}},       {-70, 1.2, {10, 10}},  {90, 1, {}},
                        {13, 0.8, {-20, -20, 5, 5}}, {180, 2.5, {30, 30}}};
  for (const char* image : {"rgb.png", "portrait.png", "tiny.png"}) {
    for (ColorMode mode : kModes) {
      for (const auto& c : cases) {
        for (const char* filter : {"nearest", "bilinear", "bicubic"}) {
          for (const auto& center : std::vector<std::vector<double>>{{}, {5, 9}}) {
            checks.push_back(deterministic(
                std::string("RandomAffine/") + filter, image, mode,
                Pipeline{RandomAffine(fixed(c.angle), {}, {c.scale, c.scale}, c.shear,
                                      interpolation_from_name(filter),
                                      {mode == ColorMode::kRGB ? 40 : 90}, center)}));
          }
        }
      }
    }
  }
  run_checks(checks, 0);
}

// RandomAffine with translation: the drawn parameters through F.affine.
TEST(TransformParityOps, AffineOnTheDrawnParameters) {
  RINGLOADER_REQUIRE_REFERENCE();
  std::vector<Check> checks;
  struct Input {
    const char* name;
    int height, width;
  };
  for (const Input image : {Input{"rgb.png", 45, 67}, Input{"large.jpg", 375, 500}}) {
    for (const char* filter : {"nearest", "bilinear", "bicubic"}) {
      for (uint64_t index = 0; index < 6; ++index) {
        Op op = RandomAffine({-30, 30}, {0.2, 0.1}, {0.75, 1.25}, {-10, 10, -5, 5},
                             interpolation_from_name(filter));
        transforms::OpParams params(op, 0);
        const auto affine = transforms::affine_params(params);
        SampleRng rng(kSeed, 0, index);
        const auto draw = transforms::draw_affine(affine, image.height, image.width, rng);
        nlohmann::json steps = {{{"fn", "affine"},
                                 {"angle", draw.angle},
                                 {"translate", draw.translate},
                                 {"scale", draw.scale},
                                 {"shear", draw.shear},
                                 {"interpolation", filter},
                                 {"fill", {0}}}};
        checks.push_back({std::string("RandomAffine/drawn/") + filter, input_path(image.name),
                          ColorMode::kRGB, Pipeline{op}, steps, index});
      }
    }
  }
  run_checks(checks, 0);
}

// RandomErasing on the box our RNG drew, through F.erase, after ToTensor,
// before and after Normalize, and after PILToTensor; RGB and L, two sizes.
TEST(TransformParityOps, RandomErasingOnTheDrawnBox) {
  RINGLOADER_REQUIRE_REFERENCE();
  struct Input {
    const char* name;
    int height, width;
    ColorMode mode;
  };
  std::vector<Check> float_checks, byte_checks;
  for (const Input image : {Input{"rgb.png", 45, 67, ColorMode::kRGB},
                            Input{"portrait.png", 480, 361, ColorMode::kGray}}) {
    const bool rgb = image.mode == ColorMode::kRGB;
    const std::vector<double> mean = rgb ? std::vector<double>{0.485, 0.456, 0.406}
                                         : std::vector<double>{0.45};
    const std::vector<double> std = rgb ? std::vector<double>{0.229, 0.224, 0.225}
                                        : std::vector<double>{0.3};
    const nlohmann::json to_tensor = {{"fn", "transform"}, {"op", {{"op", "ToTensor"}}}};
    const nlohmann::json normalize = {
        {"fn", "transform"}, {"op", {{"op", "Normalize"}, {"mean", mean}, {"std", std}}}};
    for (uint64_t index = 0; index < 8; ++index) {
      const std::vector<double> value = index % 2 || !rgb ? std::vector<double>{0.25}
                                                          : std::vector<double>{0.1, 0.9, 0.5};
      transforms::ErasingParams params;
      params.p = 1.0;
      params.value = value;
      SampleRng rng(kSeed, 0, index);
      const auto box = transforms::draw_erasing_box(params, rgb ? 3 : 1, image.height,
                                                    image.width, rng, nullptr);
      ASSERT_TRUE(box.erase);
      const nlohmann::json where = {box.top, box.left, box.height, box.width};
      const nlohmann::json erase = {{"fn", "erase"}, {"box", where}, {"value", value}};
      const Op erasing = RandomErasing(1.0, {0.02, 0.33}, {0.3, 3.3}, value);
      float_checks.push_back({"RandomErasing/after_normalize", input_path(image.name),
                              image.mode, Pipeline{ToTensor(), Normalize(mean, std), erasing},
                              {to_tensor, normalize, erase}, index});
      float_checks.push_back({"RandomErasing/before_normalize", input_path(image.name),
                              image.mode, Pipeline{ToTensor(), erasing, Normalize(mean, std)},
                              {to_tensor, erase, normalize}, index});
      const std::vector<double> bytes = {index % 2 ? 7.0 : 200.0};
      const nlohmann::json erase_bytes = {{"fn", "erase"}, {"box", where}, {"value", bytes}};
      byte_checks.push_back(
          {"RandomErasing/uint8", input_path(image.name), image.mode,
           Pipeline{PILToTensor(), RandomErasing(1.0, {0.02, 0.33}, {0.3, 3.3}, bytes)},
           {{{"fn", "transform"}, {"op", {{"op", "PILToTensor"}}}}, erase_bytes}, index});
    }
  }
  run_checks(float_checks, 1e-6);
  run_checks(byte_checks, 0);
}

}  // namespace
}  // namespace ringloader
