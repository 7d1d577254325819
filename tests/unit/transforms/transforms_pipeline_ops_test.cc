// SPDX-License-Identifier: BSD-3-Clause
// The colour, blur, geometry and erasing ops as pipeline data: torchvision's
// parameter names round-trip, shapes follow the ops (Grayscale's channels,
// expand's size), and every mistake is an OptionError naming op and
// parameter. The erasing stage is also checked on the bytes it writes.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "ringloader/errors.h"
#include "ringloader/random.h"
#include "ringloader/transforms.h"
#include "transforms/compiled_pipeline.h"
#include "transforms/random_erasing.h"

namespace ringloader {
namespace {

std::string option_error(const Pipeline& pipeline, int height = 0, int width = 0) {
  try {
    pipeline.output_shape(ColorMode::kRGB, height, width);
  } catch (const OptionError& error) {
    return error.what();
  }
  return "(no error)";
}

std::string option_error(const nlohmann::json& description) {
  try {
    return option_error(Pipeline::from_json(description));
  } catch (const OptionError& error) {
    return error.what();
  }
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(PipelineOps, BuildersSpeakTorchvision) {
  const nlohmann::json json =
      Pipeline{ColorJitter(0.4, 0.3, 0.2, 0.1), RandomRotation(15),
               RandomAffine({-5, 5}, {0.1, 0.1}), GaussianBlur(5), RandomErasingNoise()}
          .to_json();
  EXPECT_EQ(json[0]["brightness"], 0.4);
  EXPECT_EQ(json[1]["degrees"], nlohmann::json::array({-15.0, 15.0}));
  EXPECT_EQ(json[1]["interpolation"], "nearest");
  EXPECT_TRUE(json[1]["center"].is_null());
  EXPECT_TRUE(json[2]["scale"].is_null());
  EXPECT_EQ(json[3]["sigma"], nlohmann::json::array({0.1, 2.0}));
  EXPECT_EQ(json[4]["value"], "random");
  EXPECT_EQ(Pipeline::from_json(json).to_json(), json);
}

TEST(PipelineOps, ShapesFollowGrayscaleAndExpand) {
  SampleShape shape = Pipeline{Grayscale(1), CenterCrop(8), ToTensor(), Normalize({0.5}, {0.2})}
                          .output_shape(ColorMode::kRGB);
  EXPECT_EQ(shape, (SampleShape{1, 8, 8, DType::kFloat32, Layout::kCHW}));
  shape = Pipeline{Grayscale(3), CenterCrop(8)}.output_shape(ColorMode::kGray);
  EXPECT_EQ(shape.channels, 3);
  shape = Pipeline{RandomGrayscale(0.5), CenterCrop(8)}.output_shape(ColorMode::kGray);
  EXPECT_EQ(shape.channels, 1);
  // A fixed 90-degree expanding rotation of a known size swaps the sides.
  shape = Pipeline{RandomRotation({90, 90}, Interpolation::kNearest, true)}.output_shape(ColorMode::kRGB, 40,
                                                                           60);
  EXPECT_EQ(shape.height, 60);
  EXPECT_EQ(shape.width, 40);
  // A random expanding rotation needs a crop after it.
  EXPECT_HAS(option_error(Pipeline{RandomRotation({0, 30}, Interpolation::kNearest, true)}, 40, 60),
             "depends on the image");
  shape = Pipeline{RandomRotation({0, 30}, Interpolation::kNearest, true), CenterCrop(32)}.output_shape(
      ColorMode::kRGB);
  EXPECT_EQ(shape.height, 32);
}

TEST(PipelineOps, MistakesNameTheOpAndParameter) {
  auto op = [](const char* name, nlohmann::json params) {
    params["op"] = name;
    return nlohmann::json::array({params, {{"op", "CenterCrop"}, {"size", 8}}});
  };
  std::string error = option_error(op("GaussianBlur", {{"kernel_size", 4}}));
  EXPECT_HAS(error, "(GaussianBlur): parameter 'kernel_size' must be odd");
  error = option_error(op("GaussianBlur", {{"kernel_size", 3}, {"sigma", {2.0, 1.0}}}));
  EXPECT_HAS(error, "'sigma'");
  error = option_error(op("ColorJitter", {{"hue", 0.7}}));
  EXPECT_HAS(error, "(ColorJitter): parameter 'hue'");
  error = option_error(op("ColorJitter", {{"brightness", -1}}));
  EXPECT_HAS(error, "'brightness' must not be negative");
  error = option_error(op("ColorJitter", {{"contrast", {1.5, 1.0}}}));
  EXPECT_HAS(error, "'contrast' must be (min, max)");
  error = option_error(op("Grayscale", {{"num_output_channels", 2}}));
  EXPECT_HAS(error, "(Grayscale): parameter 'num_output_channels' must be 1 or 3");
  error = option_error(op("RandomRotation", {{"degrees", 10}, {"interpolation", "lanczos"}}));
  EXPECT_HAS(error, "(RandomRotation): parameter 'interpolation' is 'lanczos'");
  error = option_error(op("RandomRotation", {}));
  EXPECT_HAS(error, "'degrees' is required");
  error = option_error(op("RandomAffine", {{"degrees", 0}, {"translate", {0.1, 2.0}}}));
  EXPECT_HAS(error, "(RandomAffine): parameter 'translate' values must be in [0, 1]");
  error = option_error(op("RandomAffine", {{"degrees", 0}, {"shear", {1, 2, 3}}}));
  EXPECT_HAS(error, "'shear' must have 1 or 2 or 4 values");
  error = option_error(op("RandomAffine", {{"degrees", 0}, {"fill", 300}}));
  EXPECT_HAS(error, "'fill' values must be in [0, 255]");
  // Found by fuzz_pipeline_json: int() of 1e26 was undefined behaviour.
  error = option_error(op("RandomRotation", {{"degrees", 10}, {"fill", {1e26, 2, 3}}}));
  EXPECT_HAS(error, "'fill' values must be in [0, 255]");
  error = option_error(op("RandomAffine", {{"degrees", 0}, {"resample", 2}}));
  EXPECT_HAS(error, "'resample' is not a parameter of RandomAffine");
}

TEST(PipelineOps, ErasingBelongsToTheTensorStage) {
  EXPECT_HAS(option_error(Pipeline{CenterCrop(8), RandomErasing()}),
             "(RandomErasing) must follow ToTensor or PILToTensor");
  EXPECT_HAS(option_error(Pipeline{CenterCrop(8), PILToTensor(), RandomErasingNoise()}),
             "'value' 'random' needs ToTensor");
  EXPECT_HAS(option_error(Pipeline{CenterCrop(8), ToTensor(),
                                   RandomErasing(0.5, {0.02, 0.33}, {0.3, 3.3}, {1, 2})}),
             "'value' must have 1 or 3 values");
  EXPECT_HAS(option_error(Pipeline{CenterCrop(8), ToTensor(),
                                   RandomErasing(0.5, {0.5, 0.2})}),
             "'scale' must be (min, max)");
  EXPECT_HAS(option_error(Pipeline{CenterCrop(8), ToTensor(), RandomErasing(1.5)}), "'p'");
}

// value='random': the drawn box holds the drawn noise, normalised like the
// rest of the tensor; everything else is the plain ToTensor+Normalize.
TEST(PipelineOps, ErasingNoiseLandsInTheDrawnBox) {
  const std::vector<double> mean = {0.5, 0.4, 0.3}, std = {0.2, 0.25, 0.3};
  const Pipeline plain{ToTensor(), Normalize(mean, std)};
  const Pipeline erased{ToTensor(), RandomErasingNoise(1.0), Normalize(mean, std)};
  transforms::CompiledPipeline compiled_plain(plain, ColorMode::kRGB, 30, 40);
  transforms::CompiledPipeline compiled_erased(erased, ColorMode::kRGB, 30, 40);
  transforms::Image image(30, 40, 3), scratch;
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(i * 7);
  std::vector<float> expected(3 * 30 * 40), actual(3 * 30 * 40);
  transforms::Image copy = image;
  SampleRng rng_plain(9, 0, 1), rng_erased(9, 0, 1), replay(9, 0, 1);
  compiled_plain.run(copy, scratch, rng_plain, expected.data());
  compiled_erased.run(image, scratch, rng_erased, actual.data());
  transforms::ErasingParams params;
  params.p = 1.0;
  params.random_value = true;
  std::vector<float> noise;
  const auto box = transforms::draw_erasing_box(params, 3, 30, 40, replay, &noise);
  ASSERT_TRUE(box.erase);
  size_t inside = 0;
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 30; ++y) {
      for (int x = 0; x < 40; ++x) {
        const size_t i = (c * 30 + y) * 40 + x;
        const bool in_box = y >= box.top && y < box.top + box.height && x >= box.left &&
                            x < box.left + box.width;
        if (!in_box) {
          ASSERT_EQ(actual[i], expected[i]);
          continue;
        }
        const float v = noise[inside++];
        ASSERT_EQ(actual[i], (v - static_cast<float>(mean[c])) / static_cast<float>(std[c]));
      }
    }
  }
  EXPECT_EQ(inside, noise.size());
}

}  // namespace
}  // namespace ringloader

namespace ringloader {
namespace {

// torch's reflect padding refuses a kernel half as large as the image; so
// does the blur, with an error a failed batch can carry.
TEST(PipelineOps, BlurOfATooSmallImageSaysWhy) {
  transforms::CompiledPipeline compiled(Pipeline{GaussianBlur(9)}, ColorMode::kRGB, 3, 5);
  transforms::Image image(3, 5, 3), scratch;
  std::vector<uint8_t> out(3 * 5 * 3);
  SampleRng rng(1, 0, 0);
  try {
    compiled.run(image, scratch, rng, out.data());
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_HAS(std::string(error.what()), "GaussianBlur: kernel size 9");
  }
}

}  // namespace
}  // namespace ringloader

namespace ringloader {
namespace {

// Extreme but accepted parameters (near-90 degree shears, tiny scales,
// huge factors and ratios) give images, never undefined behaviour (the
// sanitizer builds run this), and one valid for every size they promise.
TEST(PipelineOps, ExtremeParametersStayDefined) {
  const std::vector<Pipeline> pipelines = {
      Pipeline{RandomAffine({0, 0}, {}, {}, {89.9999, 89.9999, -89.9999, -89.9999})},
      Pipeline{RandomAffine({30, 30}, {}, {1e-30, 1e-30}, {}, Interpolation::kBilinear)},
      Pipeline{RandomAffine({30, 30}, {}, {1e30, 1e30}, {}, Interpolation::kBicubic)},
      Pipeline{RandomRotation({1e30, 1e30}, Interpolation::kBilinear)},
      Pipeline{ColorJitter({1e30, 1e30}, {1e30, 1e30}, {1e30, 1e30}, {0.5, 0.5})},
      Pipeline{ToTensor(), RandomErasing(1.0, {0.0, 1.0}, {1e-30, 1e30})},
      Pipeline{GaussianBlur({5}, {1e-30, 1e30})}};
  for (const Pipeline& pipeline : pipelines) {
    SCOPED_TRACE(pipeline.to_json().dump());
    transforms::CompiledPipeline compiled(pipeline, ColorMode::kRGB, 23, 37);
    std::vector<uint8_t> out(compiled.output_shape().bytes());
    for (uint64_t index = 0; index < 20; ++index) {
      transforms::Image image(23, 37, 3), scratch;
      for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = uint8_t(i * 31);
      SampleRng rng(1, 0, index);
      compiled.run(image, scratch, rng, out.data());
    }
  }
}

}  // namespace
}  // namespace ringloader
