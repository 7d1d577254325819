// SPDX-License-Identifier: BSD-3-Clause
// The release deferral behind fences (loader/trainer/slot_releaser.h), driven
// by a test double: a slot is handed back only once its fence is done, in
// order, with many pending.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "loader/trainer/slot_releaser.h"

namespace ringloader::trainer {
namespace {

// Fences the test completes by hand; wait() completes it (the GPU "runs").
struct Fences : FenceSource {
  struct Fence : ReleaseFence {
    explicit Fence(std::shared_ptr<bool> flag) : done_(std::move(flag)) {}
    bool done() override { return *done_; }
    void wait() override { *done_ = true; }
    std::shared_ptr<bool> done_;
  };
  std::unique_ptr<ReleaseFence> record() override {
    std::lock_guard<std::mutex> lock(mutex);
    flags.push_back(std::make_shared<bool>(false));
    return std::make_unique<Fence>(flags.back());
  }
  std::mutex mutex;
  std::vector<std::shared_ptr<bool>> flags;
};

struct Releaser : ::testing::Test {
  Releaser()
      : releaser([this](uint64_t id) {
          std::lock_guard<std::mutex> lock(mutex);
          handed_back.push_back(id);
        }) {}
  std::vector<uint64_t> returned() {
    std::lock_guard<std::mutex> lock(mutex);
    return handed_back;
  }
  // Fences the releaser from now on; the test drives them.
  Fences* fence() {
    auto source = std::make_unique<Fences>();
    Fences* fences = source.get();
    releaser.set_fences(std::move(source));
    return fences;
  }
  std::mutex mutex;
  std::vector<uint64_t> handed_back;
  SlotReleaser releaser;
};

TEST_F(Releaser, WithoutFencesSlotsReturnAtOnce) {
  releaser.release(3);
  EXPECT_EQ(returned(), (std::vector<uint64_t>{3}));
  EXPECT_EQ(releaser.deferred(), 0u);
}

TEST_F(Releaser, SlotNotReturnedUntilItsFenceIsDone) {
  Fences* fences = fence();
  releaser.release(7);
  releaser.poll();
  EXPECT_TRUE(returned().empty());
  EXPECT_EQ(releaser.deferred(), 1u);
  *fences->flags[0] = true;
  releaser.poll();
  EXPECT_EQ(returned(), (std::vector<uint64_t>{7}));
  EXPECT_EQ(releaser.deferred(), 0u);
}

TEST_F(Releaser, OrderIsPreservedAndAnUndoneFenceHoldsLaterOnes) {
  Fences* fences = fence();
  for (uint64_t id : {4, 5, 6}) releaser.release(id);
  *fences->flags[1] = true;  // 5 done, 4 not: nothing yet
  *fences->flags[2] = true;
  releaser.poll();
  EXPECT_TRUE(returned().empty());
  *fences->flags[0] = true;
  releaser.poll();
  EXPECT_EQ(returned(), (std::vector<uint64_t>{4, 5, 6}));
}

TEST_F(Releaser, FlushThroughWaitsForThatFenceAndTheOnesBefore) {
  releaser.set_fences(std::make_unique<Fences>());
  for (uint64_t id = 10; id < 14; ++id) releaser.release(id);
  EXPECT_FALSE(releaser.flush_through(99));  // not deferred
  EXPECT_TRUE(releaser.flush_through(12));
  EXPECT_EQ(returned(), (std::vector<uint64_t>{10, 11, 12}));
  EXPECT_EQ(releaser.deferred(), 1u);
  EXPECT_FALSE(releaser.flush_through(12));
}

TEST_F(Releaser, ManyPendingFromManyThreads) {
  Fences* fences = fence();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      for (uint64_t i = 0; i < 250; ++i) releaser.release(t * 1000 + i);
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(releaser.deferred(), 1000u);
  releaser.poll();
  EXPECT_TRUE(returned().empty());
  for (auto& flag : fences->flags) *flag = true;
  releaser.poll();
  std::vector<uint64_t> got = returned();
  ASSERT_EQ(got.size(), 1000u);
  // Per releasing thread, in the order it released.
  for (int t = 0; t < 4; ++t) {
    uint64_t last = 0;
    bool first = true;
    for (uint64_t id : got) {
      if (id / 1000 != static_cast<uint64_t>(t)) continue;
      if (!first) EXPECT_GT(id, last);
      last = id;
      first = false;
    }
  }
}

TEST_F(Releaser, UnfencedScopeHandsBackAtOnce) {
  releaser.set_fences(std::make_unique<Fences>());
  {
    UnfencedReleaseScope scope;
    releaser.release(1);
  }
  releaser.release(2);
  EXPECT_EQ(returned(), (std::vector<uint64_t>{1}));
  EXPECT_EQ(releaser.deferred(), 1u);
}

// A node lane's teardown (attached_loader.cc): every fenced slot is waited
// for and handed back, so the node never reclaims one under a live reader.
TEST_F(Releaser, FlushAllWaitsForEveryFenceAndHandsEverySlotBack) {
  Fences* fences = fence();
  for (uint64_t id : {4, 5, 6}) releaser.release(id);
  releaser.poll();
  EXPECT_TRUE(returned().empty());
  releaser.flush_all();
  EXPECT_EQ(returned(), (std::vector<uint64_t>{4, 5, 6}));
  for (const auto& flag : fences->flags) EXPECT_TRUE(*flag);  // each waited for
  EXPECT_EQ(releaser.deferred(), 0u);
}

}  // namespace
}  // namespace ringloader::trainer
