// SPDX-License-Identifier: BSD-3-Clause
// Held batches: when next() needs a slot that a live batch holds, that batch
// is spilled (copied out of the ring, its storage's data pointer swapped) by
// default; held_batches = kRaise keeps LeaseError.
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <atomic>
#include <new>
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

// Fails the first CPU allocation of at least `bytes` (a spill's copy of a
// batch; the trainer's other allocations are smaller), then passes every
// request to the allocator it stands in for: one moment out of memory.
class FailOnce final : public c10::Allocator {
 public:
  FailOnce(c10::Allocator* real, size_t bytes) : real_(real), bytes_(bytes) {}
  // torch 2.3 made allocate() non-const and added copy_data() (pure).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  c10::DataPtr allocate(size_t n) override { return allocate_or_fail(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    real_->copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t n) const override { return allocate_or_fail(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return real_->raw_deleter(); }

 private:
  c10::DataPtr allocate_or_fail(size_t n) const {
    if (n >= bytes_ && armed_.exchange(false, std::memory_order_relaxed)) {
      throw std::bad_alloc();
    }
    return real_->allocate(n);
  }

  c10::Allocator* real_;
  size_t bytes_;
  mutable std::atomic<bool> armed_{true};
};

TEST_F(Spill, AFailedSpillIsTriedAgainByTheNextNext) {
  Loader loader(dataset_, pipeline(), two_slots(2));
  loader.begin_epoch();
  std::vector<Batch> held{*loader.next(), *loader.next()};
  std::vector<torch::Tensor> expected{held[0].data.clone(), held[1].data.clone()};
  c10::Allocator* real = c10::GetCPUAllocator();
  FailOnce fail_once(real, held[0].data.storage().nbytes());
  c10::SetCPUAllocator(&fail_once, 255);
  struct Restore {
    c10::Allocator* real;
    ~Restore() { c10::SetCPUAllocator(real, 255); }
  } restore{real};
  // Batch 2 needs batch 0's slot, and batch 0's copy cannot be allocated.
  EXPECT_THROW(loader.next(), std::bad_alloc);
  EXPECT_EQ(loader.stats().spilled_batches, 0);
  EXPECT_TRUE(torch::equal(held[0].data, expected[0]));
  // Memory is back: the same spill is tried again, and the epoch goes on.
  std::optional<Batch> third;
  ASSERT_NO_THROW(third = loader.next());
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->index, 2);
  EXPECT_EQ(loader.stats().spilled_batches, 1);
  held.push_back(*third);
  while (std::optional<Batch> batch = loader.next()) held.push_back(*batch);
  EXPECT_EQ(held.size(), 5u);
  EXPECT_TRUE(torch::equal(held[0].data, expected[0]));
  EXPECT_TRUE(torch::equal(held[1].data, expected[1]));
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
