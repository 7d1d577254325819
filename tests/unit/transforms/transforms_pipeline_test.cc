// SPDX-License-Identifier: BSD-3-Clause
// Pipelines as data: JSON round trips with torchvision's names, output
// shapes, and one OptionError per kind of mistake, each naming the op, the
// parameter and why.
#include <gtest/gtest.h>

#include <string>

#include "ringloader/errors.h"
#include "ringloader/transforms.h"

namespace ringloader {
namespace {

std::string option_error(const nlohmann::json& description, ColorMode mode = ColorMode::kRGB,
                         int height = 0, int width = 0) {
  try {
    Pipeline::from_json(description).output_shape(mode, height, width);
  } catch (const OptionError& error) {
    return error.what();
  }
  return "(no error)";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

const std::vector<double> kMean = {0.485, 0.456, 0.406}, kStd = {0.229, 0.224, 0.225};

TEST(PipelineJson, RoundTripsWithTorchvisionNames) {
  Pipeline pipeline{RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
                    Normalize(kMean, kStd)};
  const nlohmann::json json = pipeline.to_json();
  ASSERT_EQ(json.size(), 4u);
  EXPECT_EQ(json[0]["op"], "RandomResizedCrop");
  EXPECT_EQ(json[0]["size"], nlohmann::json::array({224}));
  EXPECT_EQ(json[0]["scale"][0], 0.08);
  EXPECT_EQ(json[0]["interpolation"], "bilinear");
  EXPECT_EQ(json[1]["p"], 0.5);
  EXPECT_EQ(json[3]["std"][2], 0.225);
  const Pipeline back = Pipeline::from_json(json);
  EXPECT_EQ(back.to_json(), json);
  EXPECT_EQ(back.ops()[0].params.count("op"), 0u);
}

TEST(PipelineShape, DTypeLayoutAndSizeFollowTheTensorOp) {
  SampleShape shape = Pipeline{RandomResizedCrop(224), ToTensor(), Normalize(kMean, kStd)}
                          .output_shape(ColorMode::kRGB);
  EXPECT_EQ(shape, (SampleShape{3, 224, 224, DType::kFloat32, Layout::kCHW}));
  EXPECT_EQ(shape.bytes(), 3u * 224 * 224 * 4);
  shape = Pipeline{Resize(256), CenterCrop({224, 200}), PILToTensor()}.output_shape(
      ColorMode::kGray);
  EXPECT_EQ(shape, (SampleShape{1, 224, 200, DType::kUInt8, Layout::kCHW}));
  shape = Pipeline{Resize({32, 48})}.output_shape(ColorMode::kRGB);
  EXPECT_EQ(shape, (SampleShape{3, 32, 48, DType::kUInt8, Layout::kHWC}));
  // A shorter-side Resize is fixed once the input size is known.
  shape = Pipeline{Resize(100)}.output_shape(ColorMode::kRGB, 375, 500);
  EXPECT_EQ(shape.height, 100);
  EXPECT_EQ(shape.width, 133);  // int(100 * 500 / 375)
  shape = Pipeline{}.output_shape(ColorMode::kRGB, 10, 20);
  EXPECT_EQ(shape, (SampleShape{3, 10, 20, DType::kUInt8, Layout::kHWC}));
}

TEST(PipelineErrors, MalformedDescriptions) {
  EXPECT_HAS(option_error({{"op", "Resize"}}), "a pipeline is a JSON array of ops");
  EXPECT_HAS(option_error({{{"size", 3}}}), "pipeline op 0 needs an \"op\" name");
  EXPECT_HAS(option_error({42}), "pipeline op 0 needs an \"op\" name");
}

TEST(PipelineErrors, UnknownOpListsTheSupportedOnes) {
  const std::string message =
      option_error({{{"op", "CenterCrop"}, {"size", 8}}, {{"op", "RandomPerspective"}}});
  EXPECT_HAS(message, "pipeline op 1 'RandomPerspective' is not supported");
  for (const char* name : {"Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop",
                           "RandomHorizontalFlip", "RandomVerticalFlip", "Pad", "ToTensor",
                           "PILToTensor", "Normalize", "ColorJitter", "Grayscale",
                           "RandomGrayscale", "GaussianBlur", "RandomRotation", "RandomAffine",
                           "RandomErasing"}) {
    EXPECT_HAS(message, name);
  }
}

TEST(PipelineErrors, UnknownParameterNamesTheOpAndParameter) {
  EXPECT_HAS(option_error({{{"op", "CenterCrop"}, {"size", 8}, {"sise", 9}}}),
             "pipeline op 0 (CenterCrop): parameter 'sise' is not a parameter of CenterCrop");
}

TEST(PipelineErrors, WrongTypes) {
  EXPECT_HAS(option_error({{{"op", "CenterCrop"}, {"size", "big"}}}),
             "(CenterCrop): parameter 'size' must hold integers, got \"big\"");
  EXPECT_HAS(option_error({{{"op", "CenterCrop"}, {"size", 2.5}}}),
             "parameter 'size' must hold integers");
  EXPECT_HAS(option_error({{{"op", "RandomHorizontalFlip"}, {"p", "half"}}}),
             "(RandomHorizontalFlip): parameter 'p' must be a number");
  EXPECT_HAS(option_error({{{"op", "RandomCrop"}, {"size", 8}, {"pad_if_needed", 1}}}),
             "parameter 'pad_if_needed' must be true or false");
  EXPECT_HAS(option_error({{{"op", "Resize"}, {"size", 8}, {"interpolation", "lanczos"}}}),
             "parameter 'interpolation' is 'lanczos'; expected one of: bicubic, bilinear, "
             "nearest");
  EXPECT_HAS(option_error({{{"op", "RandomCrop"}, {"size", 8}, {"padding_mode", "wrap"}}}),
             "parameter 'padding_mode' is 'wrap'");
}

TEST(PipelineErrors, SizesMustBePositiveAndWellFormed) {
  EXPECT_HAS(option_error({{{"op", "CenterCrop"}, {"size", 0}}}),
             "(CenterCrop): parameter 'size' must be positive, got 0");
  EXPECT_HAS(option_error({{{"op", "RandomResizedCrop"}, {"size", {-3, 4}}}}),
             "(RandomResizedCrop): parameter 'size' must be positive, got -3");
  EXPECT_HAS(option_error({{{"op", "Resize"}, {"size", {1, 2, 3}}}}),
             "parameter 'size' must have 1 or 2 values, got 3");
  EXPECT_HAS(option_error({{{"op", "CenterCrop"}}}), "parameter 'size' is required");
  EXPECT_HAS(option_error({{{"op", "RandomCrop"}, {"size", 8}, {"padding", {1, 2, 3}}}}),
             "parameter 'padding' must have 0 or 1 or 2 or 4 values, got 3");
  EXPECT_HAS(option_error({{{"op", "RandomCrop"}, {"size", 8}, {"padding", -1}}}),
             "parameter 'padding' must not be negative");
  EXPECT_HAS(option_error({{{"op", "RandomResizedCrop"}, {"size", 8}, {"scale", {0.9, 0.1}}}}),
             "parameter 'scale' must be (min, max)");
  EXPECT_HAS(option_error({{{"op", "RandomResizedCrop"}, {"size", 8}, {"ratio", {0, 1}}}}),
             "parameter 'ratio' must be positive");
  EXPECT_HAS(option_error({{{"op", "Resize"}, {"size", 8}, {"max_size", 8}}}),
             "parameter 'max_size' must exceed size");
  EXPECT_HAS(option_error({{{"op", "Resize"}, {"size", {8, 9}}, {"max_size", 20}}}),
             "parameter 'max_size' needs a single size");
}

TEST(PipelineErrors, ProbabilitiesMustBeInZeroOne) {
  for (double p : {-0.1, 1.5}) {
    EXPECT_HAS(option_error({{{"op", "RandomVerticalFlip"}, {"p", p}}}),
               "(RandomVerticalFlip): parameter 'p' must be in [0");
  }
  EXPECT_HAS(option_error({{{"op", "RandomVerticalFlip"}, {"p", 1.0}}, {{"op", "CenterCrop"},
                                                                         {"size", 4}}}),
             "(no error)");
}

TEST(PipelineErrors, NormalizeNeedsToTensorAndOneValuePerChannel) {
  EXPECT_HAS(option_error({{{"op", "CenterCrop"}, {"size", 4}},
                           {{"op", "Normalize"}, {"mean", kMean}, {"std", kStd}}}),
             "pipeline op 1 (Normalize) must follow ToTensor");
  EXPECT_HAS(option_error({{{"op", "CenterCrop"}, {"size", 4}}, {{"op", "PILToTensor"}},
                           {{"op", "Normalize"}, {"mean", kMean}, {"std", kStd}}}),
             "(Normalize) must follow ToTensor");
  const nlohmann::json crop = {{"op", "CenterCrop"}, {"size", 4}};
  const nlohmann::json to_tensor = {{"op", "ToTensor"}};
  EXPECT_HAS(option_error({crop, to_tensor, {{"op", "Normalize"}, {"mean", kMean},
                                             {"std", kStd}}},
                          ColorMode::kGray),
             "(Normalize): parameter 'mean' must have 1 values, got 3");
  EXPECT_HAS(option_error({crop, to_tensor, {{"op", "Normalize"}, {"mean", {0.5, 0.5}},
                                             {"std", kStd}}}),
             "parameter 'mean' must have 1 or 3 values, got 2");
  EXPECT_HAS(option_error({crop, to_tensor, {{"op", "Normalize"}, {"mean", kMean},
                                             {"std", {0.2, 0.0, 0.2}}}}),
             "(Normalize): parameter 'std' has a zero");
  EXPECT_HAS(option_error({crop, to_tensor, {{"op", "Normalize"}, {"std", kStd}}}),
             "parameter 'mean' is required");
}

TEST(PipelineErrors, ImageOpsMustComeBeforeTheTensorOp) {
  EXPECT_HAS(option_error({{{"op", "CenterCrop"}, {"size", 4}}, {{"op", "ToTensor"}},
                           {{"op", "RandomHorizontalFlip"}}}),
             "pipeline op 2 (RandomHorizontalFlip) is an image op after ToTensor");
  EXPECT_HAS(option_error({{{"op", "CenterCrop"}, {"size", 4}}, {{"op", "ToTensor"}},
                           {{"op", "PILToTensor"}}}),
             "pipeline op 2 (PILToTensor) follows another tensor op");
}

TEST(PipelineErrors, OutputSizeMustNotDependOnTheImage) {
  const std::string message =
      option_error({{{"op", "Resize"}, {"size", 256}}, {{"op", "ToTensor"}}});
  EXPECT_HAS(message, "pipeline output size depends on the image: end with a crop");
  EXPECT_HAS(message, "Resize([h, w])");
  EXPECT_HAS(option_error({{{"op", "RandomHorizontalFlip"}}}), "depends on the image");
  EXPECT_HAS(option_error({{{"op", "CenterCrop"}, {"size", 8}}, {{"op", "Pad"},
                                                                 {"padding", 2}}}),
             "(no error)");
}

}  // namespace
}  // namespace ringloader
