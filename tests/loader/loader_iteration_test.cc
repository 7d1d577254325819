// SPDX-License-Identifier: BSD-3-Clause
// Iteration semantics: shapes, order, short last batch, drop_last, leases,
// abandoned epochs, IDX data.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <thread>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

using Iteration = testing::FolderTest<2, 11>;  // 22 samples

TEST_F(Iteration, ShapesDtypesAndShortLastBatch) {
  Loader loader(dataset_, Pipeline{CenterCrop(20), ToTensor()}, options(8, 2));
  EXPECT_EQ(loader.size(), 3);
  std::vector<int64_t> sizes;
  int64_t expected_index = 0;
  for (Batch& batch : loader) {
    EXPECT_EQ(batch.data.dtype(), torch::kFloat32);
    EXPECT_EQ(batch.data.size(1), 3);
    EXPECT_EQ(batch.data.size(2), 20);
    EXPECT_EQ(batch.data.size(3), 20);
    EXPECT_EQ(batch.target.dtype(), torch::kInt64);
    EXPECT_EQ(batch.index, expected_index++);
    sizes.push_back(batch.data.size(0));
    EXPECT_GE(batch.data.min().item<float>(), 0.0f);
    EXPECT_LE(batch.data.max().item<float>(), 1.0f);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{8, 8, 6}));
}

TEST_F(Iteration, DropLastDropsTheShortBatch) {
  auto opts = options(8, 1);
  opts.drop_last = true;
  Loader loader(dataset_, Pipeline{CenterCrop(20)}, opts);
  EXPECT_EQ(loader.size(), 2);
  int count = 0;
  for (Batch& batch : loader) {
    EXPECT_EQ(batch.data.size(0), 8);
    ++count;
  }
  EXPECT_EQ(count, 2);
}

TEST_F(Iteration, Uint8HwcWithoutToTensorAndChwWithPILToTensor) {
  Loader hwc(dataset_, Pipeline{CenterCrop(std::vector<int>{10, 12})}, options(4, 1));
  Batch a = *hwc.begin();
  EXPECT_EQ(a.data.dtype(), torch::kUInt8);
  EXPECT_EQ(a.data.sizes(), (std::vector<int64_t>{4, 10, 12, 3}));
  Loader chw(dataset_, Pipeline{CenterCrop(std::vector<int>{10, 12}), PILToTensor()},
             options(4, 1));
  Batch b = *chw.begin();
  EXPECT_EQ(b.data.sizes(), (std::vector<int64_t>{4, 3, 10, 12}));
  EXPECT_TRUE(torch::equal(a.data.permute({0, 3, 1, 2}), b.data));
}

TEST_F(Iteration, SequentialOrderWithoutShuffle) {
  Loader loader(dataset_, Pipeline{CenterCrop(8)}, options(5, 2));
  int64_t next = 0;
  for (Batch& batch : loader) {
    for (int64_t index : batch.sample_indices) EXPECT_EQ(index, next++);
  }
  EXPECT_EQ(next, 22);
}

TEST_F(Iteration, ManyEpochsDeliverEverythingEachTime) {
  auto opts = options(3, 2);
  opts.ring_slots = 2;  // wraps the ring many times per epoch
  opts.shuffle = true;
  Loader loader(dataset_, Pipeline{CenterCrop(8)}, opts);
  for (int epoch = 0; epoch < 5; ++epoch) {
    int64_t seen = 0;
    for (Batch& batch : loader) seen += batch.data.size(0);
    EXPECT_EQ(seen, 22) << "epoch " << epoch;
  }
}

TEST_F(Iteration, HoldingEveryRingSlotRaisesLeaseErrorWhenAsked) {
  for (int workers : {0, 2}) {
    auto opts = options(4, workers);
    opts.ring_slots = 3;
    opts.poll_interval_s = 0.02;
    opts.held_batches = HeldBatches::kRaise;
    Loader loader(dataset_, Pipeline{CenterCrop(8)}, opts);
    std::vector<Batch> held;
    auto it = loader.begin();
    held.push_back(*it);
    held.push_back(*loader.next());
    held.push_back(*loader.next());
    EXPECT_THROW(loader.next(), LeaseError) << workers << " workers";
    held.erase(held.begin());  // frees the oldest slot
    it = Loader::Iterator();
    EXPECT_NO_THROW(loader.next());
  }
}

TEST_F(Iteration, TensorsOutliveTheLoaderAndKeepTheirBytes) {
  torch::Tensor kept, copy;
  {
    Loader loader(dataset_, Pipeline{CenterCrop(8), ToTensor()}, options(4, 2));
    Batch batch = *loader.begin();
    kept = batch.data;
    copy = batch.data.clone();
  }
  EXPECT_TRUE(torch::equal(kept, copy));
}

TEST_F(Iteration, BatchesReleasedFromAnotherThread) {
  auto opts = options(2, 2);
  opts.ring_slots = 2;
  Loader loader(dataset_, Pipeline{CenterCrop(8)}, opts);
  int64_t seen = 0;
  for (auto it = loader.begin(); it != loader.end(); ++it) {
    Batch batch = std::move(*it);
    *it = Batch{};
    seen += batch.data.size(0);
    std::thread([b = std::move(batch)]() mutable { b = Batch{}; }).join();
  }
  EXPECT_EQ(seen, 22);
}

TEST_F(Iteration, AbandonedEpochIsCancelledAndTheNextIsComplete) {
  auto opts = options(2, 2);
  opts.ring_slots = 4;
  Loader loader(dataset_, Pipeline{CenterCrop(8)}, opts);
  for (int round = 0; round < 4; ++round) {
    // Take one batch and keep it while the next epoch starts: the rest of
    // the abandoned epoch is cancelled, not delivered.
    auto abandoned = loader.begin();
    Batch kept = *abandoned;
    abandoned = Loader::Iterator();
    std::vector<int64_t> seen;
    auto it = loader.begin();
    kept = Batch{};
    for (; it != loader.end(); ++it) {
      seen.insert(seen.end(), it->sample_indices.begin(), it->sample_indices.end());
    }
    ASSERT_EQ(seen.size(), 22u) << "round " << round;
    for (int64_t i = 0; i < 22; ++i) EXPECT_EQ(seen[i], i);
  }
}

TEST(IdxDataset, FashionMnistFromDebianMatchesTheRawFile) {
  const std::string root = "/usr/share/datasets/fashion-mnist/";
  if (access((root + "t10k-images-idx3-ubyte.gz").c_str(), R_OK) != 0) {
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  }
  Dataset dataset = Dataset::idx(root + "t10k-images-idx3-ubyte.gz",
                                 root + "t10k-labels-idx1-ubyte.gz");
  ASSERT_EQ(dataset.size(), 10000);
  LoaderOptions options;
  options.batch_size = 256;
  options.num_workers = 2;
  Loader loader(dataset, Pipeline{}, options);
  EXPECT_EQ(loader.size(), 40);
  int64_t samples = 0;
  torch::Tensor first;
  for (Batch& batch : loader) {
    if (samples == 0) first = batch.data.clone();
    samples += batch.data.size(0);
    EXPECT_GE(batch.target.min().item<int64_t>(), 0);
    EXPECT_LE(batch.target.max().item<int64_t>(), 9);
  }
  EXPECT_EQ(samples, 10000);
  EXPECT_EQ(first.sizes(), (std::vector<int64_t>{256, 28, 28, 1}));
  // The first test image of Fashion-MNIST is an ankle boot (label 9) with a
  // black border: check a couple of facts rather than a stored copy.
  EXPECT_EQ(first[0][0][0][0].item<uint8_t>(), 0);
  EXPECT_GT(first[0].to(torch::kFloat32).mean().item<float>(), 10.0f);
}

}  // namespace
}  // namespace ringloader
