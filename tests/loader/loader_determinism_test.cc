// SPDX-License-Identifier: BSD-3-Clause
// The bytes of every batch depend only on (seed, epoch, dataset): never on
// the number of workers or how they are scheduled.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

Pipeline augmenting_pipeline() {
  return Pipeline{RandomResizedCrop(16), RandomHorizontalFlip(), ToTensor(),
                  Normalize({0.5, 0.4, 0.3}, {0.2, 0.25, 0.3})};
}

struct EpochBytes {
  std::vector<torch::Tensor> data;
  std::vector<torch::Tensor> targets;
  std::vector<std::vector<int64_t>> indices;
};

EpochBytes run_epochs(const Dataset& dataset, int workers, int epochs) {
  LoaderOptions options;
  options.batch_size = 7;
  options.num_workers = workers;
  options.shuffle = true;
  options.seed = 1234;
  Loader loader(dataset, augmenting_pipeline(), options);
  EpochBytes out;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    loader.set_epoch(epoch);
    for (Batch& batch : loader) {
      out.data.push_back(batch.data.clone());
      out.targets.push_back(batch.target.clone());
      out.indices.push_back(batch.sample_indices);
    }
  }
  return out;
}

class Determinism : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_image_folder(dir_ / "images", 3, 10);
    dataset_ = Dataset::image_folder(dir_ / "images");
  }
  testing::TempDir dir_;
  Dataset dataset_;
};

TEST_F(Determinism, SameBytesForZeroOneTwoAndFourWorkers) {
  EpochBytes reference = run_epochs(dataset_, 0, 2);
  ASSERT_EQ(reference.data.size(), 2u * 5u);  // 30 samples / 7 -> 5 batches
  for (int workers : {1, 2, 4}) {
    EpochBytes other = run_epochs(dataset_, workers, 2);
    ASSERT_EQ(other.data.size(), reference.data.size()) << workers;
    for (size_t b = 0; b < reference.data.size(); ++b) {
      EXPECT_TRUE(torch::equal(other.data[b], reference.data[b]))
          << "batch " << b << " differs with " << workers << " workers";
      EXPECT_TRUE(torch::equal(other.targets[b], reference.targets[b]));
      EXPECT_EQ(other.indices[b], reference.indices[b]);
    }
  }
}

TEST_F(Determinism, EveryEpochIsAPermutationAndEpochsDiffer) {
  EpochBytes run = run_epochs(dataset_, 2, 2);
  std::vector<int64_t> first, second;
  for (size_t b = 0; b < 5; ++b) {
    first.insert(first.end(), run.indices[b].begin(), run.indices[b].end());
    second.insert(second.end(), run.indices[b + 5].begin(), run.indices[b + 5].end());
  }
  EXPECT_EQ(std::set<int64_t>(first.begin(), first.end()).size(), 30u);
  EXPECT_EQ(std::set<int64_t>(second.begin(), second.end()).size(), 30u);
  EXPECT_NE(first, second) << "shuffle must change with the epoch";
  // Same sample in two epochs gets different augmentation.
  EXPECT_FALSE(torch::equal(run.data[0], run.data[5]));
}

TEST_F(Determinism, TargetsMatchTheSamplesFolders) {
  EpochBytes run = run_epochs(dataset_, 2, 1);
  for (size_t b = 0; b < run.indices.size(); ++b) {
    for (size_t i = 0; i < run.indices[b].size(); ++i) {
      int64_t sample = run.indices[b][i];
      EXPECT_EQ(run.targets[b][i].item<int64_t>(),
                dataset_.files()[sample].label);
      EXPECT_EQ(run.targets[b][i].item<int64_t>(), sample / 10);
    }
  }
}

TEST_F(Determinism, SeedChangesTheOrder) {
  LoaderOptions options;
  options.batch_size = 30;
  options.shuffle = true;
  options.seed = 1;
  Loader a(dataset_, Pipeline{CenterCrop(8)}, options);
  options.seed = 2;
  Loader b(dataset_, Pipeline{CenterCrop(8)}, options);
  EXPECT_NE((*a.begin()).sample_indices, (*b.begin()).sample_indices);
}

}  // namespace
}  // namespace ringloader
