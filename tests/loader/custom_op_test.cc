// SPDX-License-Identifier: BSD-3-Clause
// Custom ops from a shared library (samples/custom_op/sample_ops.cc): the
// trainer validates them and sizes the batch at construction, spawned
// workers dlopen the same library by path and run them, deterministically;
// every failure to load or configure is an OptionError naming library and op.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "ringloader/custom_op.h"
#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

using CustomOps = testing::FolderTest<2, 6>;  // 12 samples

const std::string kLibrary = RINGLOADER_TEST_CUSTOM_OPS;

torch::Tensor all_batches(const Dataset& dataset, const Pipeline& pipeline, int workers) {
  Loader loader(dataset, pipeline, testing::make_options(5, workers));
  std::vector<torch::Tensor> batches;
  for (Batch& batch : loader) batches.push_back(batch.data.clone());
  return torch::cat(batches);
}

TEST_F(CustomOps, WorkersRunTheLibrarysOp) {
  const auto plain = all_batches(dataset_, Pipeline{CenterCrop(20), PILToTensor()}, 2);
  const auto inverted = all_batches(
      dataset_,
      Pipeline{CenterCrop(20), Custom(kLibrary, "RandomInvert", {{"p", 1.0}}), PILToTensor()},
      2);
  ASSERT_EQ(inverted.sizes(), plain.sizes());
  EXPECT_TRUE(torch::equal(inverted, 255 - plain));
}

TEST_F(CustomOps, RandomDrawsDependOnlyOnTheSample) {
  const Pipeline pipeline{CenterCrop(20), Custom(kLibrary, "RandomInvert", {{"p", 0.5}}),
                          PILToTensor()};
  const auto in_trainer = all_batches(dataset_, pipeline, 0);
  EXPECT_TRUE(torch::equal(all_batches(dataset_, pipeline, 2), in_trainer));
  const auto plain = all_batches(dataset_, Pipeline{CenterCrop(20), PILToTensor()}, 0);
  int inverted = 0;
  for (int64_t i = 0; i < plain.size(0); ++i) {
    inverted += torch::equal(in_trainer[i], 255 - plain[i]);
  }
  EXPECT_GT(inverted, 0);
  EXPECT_LT(inverted, plain.size(0));
}

TEST_F(CustomOps, OutputSizeComesFromTheOp) {
  const Pipeline pipeline{CenterCrop(20), Custom(kLibrary, "ShaveBorder", {{"pixels", 3}}),
                          ToTensor()};
  EXPECT_EQ(pipeline.output_shape(ColorMode::kRGB).height, 14);
  const auto data = all_batches(dataset_, pipeline, 2);
  EXPECT_EQ(data.sizes(), (std::vector<int64_t>{12, 3, 14, 14}));
  // As the last op on images of varying size, the batch shape is unknown.
  EXPECT_THROW(Loader(dataset_, Pipeline{Custom(kLibrary, "ShaveBorder", {{"pixels", 1}})},
                      testing::make_options(4, 1)),
               OptionError);
}

// The OptionError Loader construction raises for `op`, or "" if none.
std::string construction_error(const Dataset& dataset, const Op& op) {
  try {
    Loader loader(dataset, Pipeline{CenterCrop(20), op}, testing::make_options(4, 1));
  } catch (const OptionError& error) {
    return error.what();
  }
  return "";
}

TEST_F(CustomOps, LoadAndParameterErrorsNameLibraryAndOp) {
  const std::string missing = dir_ / "no_such_library.so";
  std::string error = construction_error(dataset_, Custom(missing, "RandomInvert"));
  EXPECT_NE(error.find(missing), std::string::npos) << error;
  EXPECT_NE(error.find("RandomInvert"), std::string::npos) << error;
  EXPECT_NE(error.find("cannot load library"), std::string::npos) << error;

  error = construction_error(dataset_, Custom("libz.so.1", "RandomInvert"));
  EXPECT_NE(error.find("no entry point ringloader_custom_ops_v1"), std::string::npos) << error;

  error = construction_error(dataset_, Custom(kLibrary, "Solarize"));
  EXPECT_NE(error.find("no op 'Solarize'"), std::string::npos) << error;
  EXPECT_NE(error.find("RandomInvert, ShaveBorder"), std::string::npos) << error;
  EXPECT_NE(error.find(kLibrary), std::string::npos) << error;

  error = construction_error(dataset_, Custom(kLibrary, "RandomInvert", {{"p", 2}}));
  EXPECT_NE(error.find("'p' must be in [0, 1]"), std::string::npos) << error;
  EXPECT_NE(error.find("RandomInvert"), std::string::npos) << error;

  error = construction_error(dataset_, Custom(kLibrary, "ShaveBorder", {{"pixel", 2}}));
  EXPECT_NE(error.find("'pixels' (an integer) is required"), std::string::npos) << error;

  error = construction_error(dataset_, Op{"Custom", {{"name", "RandomInvert"}}});
  EXPECT_NE(error.find("'library' is required"), std::string::npos) << error;
}

}  // namespace
}  // namespace ringloader
