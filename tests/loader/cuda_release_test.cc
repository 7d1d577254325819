// SPDX-License-Identifier: BSD-3-Clause
// The release race (issue 17): with a pinned ring, batch.data.to(cuda,
// non_blocking) enqueues a copy out of the slot and the batch is dropped at
// once. The slot must not go back to the workers before that copy ran.
// These need a GPU and a CUDA libtorch; elsewhere they check that CUDA is
// left alone and skip.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

using CudaRelease = testing::FolderTest<2, 10>;  // 20 samples: 10 batches of 2

Pipeline pipeline() { return Pipeline{RandomResizedCrop(48), ToTensor()}; }

LoaderOptions race_options(bool pin) {
  LoaderOptions options = testing::make_options(2, 2);
  options.ring_slots = 2;  // workers wait for every slot the trainer frees
  options.shuffle = true;
  options.seed = 17;
  options.pin_memory = pin;
  return options;
}

TEST_F(CudaRelease, NothingIsPinnedUnlessAsked) {
  Loader loader(dataset_, pipeline(), race_options(false));
  for (Batch& batch : loader) EXPECT_GT(batch.data.numel(), 0);
  EXPECT_FALSE(loader.stats().ring_pinned);
}

TEST_F(CudaRelease, PinningWaitsForTheFirstIteration) {
  Loader loader(dataset_, pipeline(), race_options(true));
  EXPECT_FALSE(loader.stats().ring_pinned);  // never at construction
  for (Batch& batch : loader) EXPECT_GT(batch.data.numel(), 0);
  if (torch::cuda::is_available()) EXPECT_TRUE(loader.stats().ring_pinned);
}

// A slow consumer: a long kernel on the current stream, then the batch's
// non_blocking copy queued behind it, then the host batch dropped.
TEST_F(CudaRelease, SlowConsumerCopiesNeverSeeAnOverwrittenSlot) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU and a CUDA libtorch";
  constexpr int kEpochs = 8;
  Loader reference(dataset_, pipeline(), race_options(false));
  std::vector<torch::Tensor> expected;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    for (Batch& batch : reference) expected.push_back(batch.data.clone());
  }
  Loader loader(dataset_, pipeline(), race_options(true));
  torch::Tensor work = torch::rand({2048, 2048}, torch::kCUDA);
  std::vector<torch::Tensor> got;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    loader.begin_epoch();
    while (std::optional<Batch> batch = loader.next()) {
      for (int i = 0; i < 4; ++i) work = torch::mm(work, work).clamp_(-1, 1);
      got.push_back(batch->data.to(torch::kCUDA, /*non_blocking=*/true));
    }  // the host batch dies here, its copy still queued
  }
  ASSERT_TRUE(loader.stats().ring_pinned);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(torch::equal(got[i].cpu(), expected[i])) << "batch " << i;
  }
}

}  // namespace
}  // namespace ringloader
