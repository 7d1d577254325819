// SPDX-License-Identifier: BSD-3-Clause
// Dataset::tensor_rows through the public Loader: spawned workers (and the
// trainer itself with num_workers = 0) copy rows into the ring, and each
// batch is the rows of its sample indices, typed and shaped as the rows,
// with their labels; held batches spill with their views; a pipeline over
// rows is refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

struct Rows {
  torch::Tensor features;  // (37, 2, 3) of the tested type
  torch::Tensor labels;    // (37,) int64
  Dataset dataset(ElementType type) const {
    TensorRowsData data;
    data.rows = features.data_ptr();
    data.row_count = features.size(0);
    data.type = type;
    data.row_shape = {2, 3};
    data.labels = labels.data_ptr<int64_t>();
    return Dataset::tensor_rows(data);
  }
};

Rows make_rows(torch::ScalarType type) {
  torch::manual_seed(3);
  return {(torch::randn({37, 2, 3}) * 40).to(type).contiguous(),
          torch::randint(0, 1000, {37}, torch::kInt64)};
}

LoaderOptions options(int workers) {
  LoaderOptions out = testing::make_options(8, workers);
  out.shuffle = true;
  out.seed = 11;
  out.ring_slots = 2;  // keeping every batch makes the ring spill them
  return out;
}

TEST(TensorRowsLoader, BatchesAreTheRowsOfTheirSamplesTypedAndShaped) {
  const std::pair<ElementType, torch::ScalarType> types[] = {
      {ElementType::kFloat32, torch::kFloat32}, {ElementType::kInt16, torch::kInt16},
      {ElementType::kBFloat16, torch::kBFloat16}, {ElementType::kFloat64, torch::kFloat64}};
  for (const auto& [type, scalar] : types) {
    const Rows rows = make_rows(scalar);
    const Dataset dataset = rows.dataset(type);
    for (int workers : {0, 2}) {
      Loader loader(dataset, Pipeline{}, options(workers));
      std::vector<Batch> held;  // all kept: slots spill, views must follow
      for (Batch& batch : loader) held.push_back(batch);
      int64_t samples = 0;
      for (const Batch& batch : held) {
        const int64_t count = static_cast<int64_t>(batch.sample_indices.size());
        ASSERT_EQ(batch.data.scalar_type(), scalar);
        ASSERT_EQ(batch.data.sizes(), (std::vector<int64_t>{count, 2, 3}));
        const torch::Tensor index = torch::tensor(batch.sample_indices, torch::kInt64);
        EXPECT_TRUE(torch::equal(batch.data, rows.features.index_select(0, index)))
            << name_of(type) << " workers " << workers;
        EXPECT_TRUE(torch::equal(batch.target, rows.labels.index_select(0, index)));
        samples += count;
      }
      EXPECT_EQ(samples, 37);
      EXPECT_GT(loader.stats().spilled_batches, 0);
    }
  }
}

TEST(TensorRowsLoader, APipelineOverRowsIsRefused) {
  const Dataset dataset = make_rows(torch::kFloat32).dataset(ElementType::kFloat32);
  try {
    Loader loader(dataset, Pipeline{ToTensor()}, options(0));
    FAIL();
  } catch (const OptionError& error) {
    EXPECT_NE(std::string(error.what()).find("pipeline must be empty"), std::string::npos);
  }
}

}  // namespace
}  // namespace ringloader
