// SPDX-License-Identifier: BSD-3-Clause
// Held batches: when next() needs a slot that a live batch holds, that batch
// is spilled (copied out of the ring, its storage's data pointer swapped) by
// default; held_batches = kRaise keeps LeaseError.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "ringloader/ringloader.h"
#include "test_data.h"

namespace ringloader {
namespace {

using Spill = testing::FolderTest<2, 9>;  // 18 samples: 5 batches of 4

Pipeline pipeline() { return Pipeline{RandomResizedCrop(12), ToTensor()}; }

LoaderOptions two_slots(int workers) {
  LoaderOptions options = testing::make_options(4, workers);
  options.ring_slots = 2;
  options.shuffle = true;
  options.seed = 5;
  options.poll_interval_s = 0.02;
  return options;
}

// The reference: a loop that clones each batch and drops it at once.
std::vector<torch::Tensor> cloned_epochs(Loader& loader, int epochs) {
  std::vector<torch::Tensor> out;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (Batch& batch : loader) {
      out.push_back(batch.data.clone());
      out.push_back(batch.target.clone());
    }
  }
  return out;
}

TEST_F(Spill, HoldingEveryBatchOfThreeEpochsEqualsACloningLoop) {
  for (int workers : {0, 2}) {
    Loader reference(dataset_, pipeline(), two_slots(workers));
    std::vector<torch::Tensor> expected = cloned_epochs(reference, 3);
    EXPECT_EQ(reference.stats().spilled_batches, 0);

    Loader loader(dataset_, pipeline(), two_slots(workers));
    std::vector<Batch> held;
    for (int epoch = 0; epoch < 3; ++epoch) {
      loader.begin_epoch();
      while (std::optional<Batch> batch = loader.next()) held.push_back(*batch);
    }
    ASSERT_EQ(2 * held.size(), expected.size());
    for (size_t i = 0; i < held.size(); ++i) {
      EXPECT_TRUE(torch::equal(held[i].data, expected[2 * i])) << workers << " batch " << i;
      EXPECT_TRUE(torch::equal(held[i].target, expected[2 * i + 1]));
    }
    // 15 batches through 2 slots: all but the last two left the ring.
    EXPECT_EQ(loader.stats().spilled_batches, 13) << workers << " workers";
  }
}

TEST_F(Spill, ViewsTakenBeforeTheSpillSeeTheSpilledBytes) {
  Loader loader(dataset_, pipeline(), two_slots(2));
  loader.begin_epoch();
  torch::Tensor view, expected;
  {
    Batch first = *loader.next();
    view = first.data.slice(0, 1, 3).select(1, 2);  // a view, the batch dropped
    expected = view.clone();
  }
  const void* in_ring = view.data_ptr();
  std::vector<Batch> rest;
  while (std::optional<Batch> batch = loader.next()) rest.push_back(*batch);
  EXPECT_GE(loader.stats().spilled_batches, 1);
  EXPECT_NE(view.data_ptr(), in_ring);  // it moved out of the slot...
  EXPECT_TRUE(torch::equal(view, expected));  // ...with its bytes
}

TEST_F(Spill, RaiseKeepsLeaseError) {
  LoaderOptions options = two_slots(2);
  options.held_batches = HeldBatches::kRaise;
  Loader loader(dataset_, pipeline(), options);
  loader.begin_epoch();
  std::vector<Batch> held;
  held.push_back(*loader.next());
  held.push_back(*loader.next());
  EXPECT_THROW(loader.next(), LeaseError);
  EXPECT_EQ(loader.stats().spilled_batches, 0);
}

TEST_F(Spill, DroppedBatchesAreNeverCopied) {
  Loader loader(dataset_, pipeline(), two_slots(2));
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (Batch& batch : loader) EXPECT_GT(batch.data.numel(), 0);
  }
  EXPECT_EQ(loader.stats().spilled_batches, 0);
}

}  // namespace
}  // namespace ringloader
