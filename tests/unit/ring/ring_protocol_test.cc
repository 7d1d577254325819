// SPDX-License-Identifier: BSD-3-Clause
// The fence protocol under concurrency, without processes or decoders:
// filler threads and a consumer share a real memfd ring. Run under TSan in CI.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "loader/ring/futex.h"
#include "loader/ring/ring.h"
#include "loader/ring/slot_protocol.h"

namespace ringloader::ring {
namespace {

RingGeometry small_geometry(uint32_t slots) {
  RingGeometry geometry;
  geometry.slot_count = slots;
  geometry.worker_capacity = 4;
  geometry.batch_size = 4;
  geometry.sample_bytes = 16;
  geometry.order_capacity = 64;
  return geometry;
}

TEST(RingLayout, GeometryIsAlignedAndAttachable) {
  auto ring = Ring::create(small_geometry(3));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ring->slot_data(0)) % kPageSize, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&ring->slot(1)) % kCacheLine, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&ring->claims()) % kCacheLine, 0u);
  auto again = Ring::attach(dup(ring->fd()));
  EXPECT_EQ(again->geometry().slot_count, 3u);
  ring->slot_targets(2)[3] = 42;
  EXPECT_EQ(again->slot_targets(2)[3], 42);  // same pages
}

TEST(RingLayout, AttachRejectsForeignMemory) {
  int fd = SharedRegion::create_text_fd("ringloader-test", "not a ring at all");
  EXPECT_ANY_THROW(Ring::attach(fd));
}

TEST(SlotProtocol, ClaimsFollowPlansAndStopAtTheirEnd) {
  auto ring = Ring::create(small_geometry(2));
  SlotProtocol protocol(*ring);
  Claim claim;
  EXPECT_FALSE(protocol.try_claim(claim));  // no plan yet
  EXPECT_EQ(protocol.publish_plan(0, 3, 10, 0), 0u);
  for (uint64_t expected = 0; expected < 3; ++expected) {
    ASSERT_TRUE(protocol.try_claim(claim));
    EXPECT_EQ(claim.batch_id, expected);
    EXPECT_EQ(claim.local_index, expected);
  }
  EXPECT_FALSE(protocol.try_claim(claim));
  // Next plan starts right after the last claimed id.
  EXPECT_EQ(protocol.publish_plan(1, 5, 20, 1), 3u);
  ASSERT_TRUE(protocol.try_claim(claim));
  EXPECT_EQ(claim.batch_id, 3u);
  EXPECT_EQ(claim.epoch, 1u);
  EXPECT_EQ(claim.order_table, 1u);
  // Abandon after one claim: the next plan starts at 4, nothing cancelled
  // but that one claimed id.
  EXPECT_EQ(protocol.publish_plan(2, 5, 20, 0), 4u);
  EXPECT_TRUE(protocol.cancelled(3));
  EXPECT_FALSE(protocol.cancelled(4));
}

// seeding="torch": each of 2 workers takes only its turns of the epoch's
// batches, from worker 0 again at each plan, as torch deals them.
TEST(SlotProtocol, DealtClaimsTakeTurnsFromWorkerZeroAtEachPlan) {
  auto ring = Ring::create(small_geometry(2));
  SlotProtocol protocol(*ring);
  const SlotProtocol::Deal first{0, 2}, second{1, 2};
  Claim claim;
  EXPECT_EQ(protocol.publish_plan(0, 3, 12, 0), 0u);
  EXPECT_FALSE(protocol.try_claim(claim, nullptr, second));  // batch 0 is worker 0's
  ASSERT_TRUE(protocol.try_claim(claim, nullptr, first));
  EXPECT_EQ(claim.local_index, 0u);
  uint32_t signal = ring->claims().plan_signal.load();
  EXPECT_FALSE(protocol.try_claim(claim, nullptr, first));
  ASSERT_TRUE(protocol.try_claim(claim, nullptr, second));
  EXPECT_EQ(claim.local_index, 1u);
  EXPECT_NE(ring->claims().plan_signal.load(), signal);  // worker 0 was woken
  ASSERT_TRUE(protocol.try_claim(claim, nullptr, first));
  EXPECT_EQ(claim.local_index, 2u);
  // 3 batches: the next epoch starts with worker 0 again, not worker 1.
  EXPECT_EQ(protocol.publish_plan(1, 3, 12, 1), 3u);
  EXPECT_FALSE(protocol.try_claim(claim, nullptr, second));
  ASSERT_TRUE(protocol.try_claim(claim, nullptr, first));
  EXPECT_EQ(claim.batch_id, 3u);
  EXPECT_EQ(claim.local_index, 0u);
}

TEST(SlotProtocol, AnExtendedPlanGoesOnWithoutCancellingItsClaims) {
  auto ring = Ring::create(small_geometry(2));
  SlotProtocol protocol(*ring);
  Claim claim;
  EXPECT_EQ(protocol.publish_plan(0, 2, 8, 0), 0u);
  ASSERT_TRUE(protocol.try_claim(claim));
  ASSERT_TRUE(protocol.try_claim(claim));
  EXPECT_FALSE(protocol.try_claim(claim));  // the window's end
  const uint32_t signal = ring->claims().plan_signal.load(std::memory_order_acquire);
  protocol.extend_plan(4, 14);
  EXPECT_NE(ring->claims().plan_signal.load(std::memory_order_acquire), signal);
  EXPECT_FALSE(protocol.cancelled(1));
  for (uint64_t expected = 2; expected < 4; ++expected) {
    ASSERT_TRUE(protocol.try_claim(claim));
    EXPECT_EQ(claim.batch_id, expected);
    EXPECT_EQ(claim.sample_count, 14u);  // the last batch holds 2
  }
  EXPECT_FALSE(protocol.try_claim(claim));
  EXPECT_EQ(protocol.publish_plan(1, 1, 4, 1), 4u);  // a new epoch after it
}

// A claimer that sees an extension's batch count sees its entries.
TEST(SlotProtocol, EntriesOfAnExtensionAreVisibleToItsClaimers) {
  auto ring = Ring::create(small_geometry(4));
  SlotProtocol protocol(*ring);
  constexpr uint64_t kBatches = 2000;
  protocol.publish_plan(0, 1, 4, 0);
  for (uint64_t i = 0; i < 4; ++i) ring->set_order_entry(0, i, static_cast<int64_t>(i));
  std::atomic<uint64_t> taken{0};
  std::atomic<bool> wrong{false};
  std::thread claimer([&] {
    Claim claim;
    while (taken.load(std::memory_order_relaxed) < kBatches) {
      if (!protocol.try_claim(claim)) continue;
      const uint64_t begin = claim.local_index * 4;
      if (ring->order_entry(0, begin) != static_cast<int64_t>(begin)) wrong = true;
      taken.fetch_add(1, std::memory_order_release);
    }
  });
  for (uint64_t batches = 2; batches <= kBatches; ++batches) {
    // Window of 16 batches' worth of entries: wait until the claimer is
    // past the entries about to be overwritten.
    while (taken.load(std::memory_order_acquire) + 15 < batches) std::this_thread::yield();
    for (uint64_t i = (batches - 1) * 4; i < batches * 4; ++i) {
      ring->set_order_entry(0, i, static_cast<int64_t>(i));
    }
    protocol.extend_plan(batches, batches * 4);
  }
  claimer.join();
  EXPECT_FALSE(wrong.load());
}

TEST(SlotProtocol, SlotWalksThroughItsPhases) {
  auto ring = Ring::create(small_geometry(2));
  SlotProtocol protocol(*ring);
  protocol.publish_plan(0, 4, 16, 0);
  EXPECT_TRUE(protocol.acquire_for_fill(1, [] { return true; }));
  EXPECT_EQ(phase_of(ring->slot(1).state.load()), kFilling);
  protocol.publish(1, kReady);
  EXPECT_EQ(ring->slot(1).state.load(), state_word(1, 2, kReady));
  protocol.lease(1);
  // Batch 3 shares slot 1: not fillable while batch 1 is leased.
  EXPECT_FALSE(protocol.acquire_for_fill(3, [] { return false; }));
  protocol.release(1);
  EXPECT_EQ(ring->slot(1).state.load(), state_word(3, 2, kFree));
  EXPECT_TRUE(protocol.acquire_for_fill(3, [] { return true; }));
}

TEST(SlotProtocol, CancelledReadySlotMovesToTheNextLiveId) {
  auto ring = Ring::create(small_geometry(2));
  SlotProtocol protocol(*ring);
  protocol.publish_plan(0, 10, 40, 0);
  Claim claim;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(protocol.try_claim(claim));  // 0..3
  ASSERT_TRUE(protocol.acquire_for_fill(0, [] { return true; }));
  protocol.publish(0, kReady);
  protocol.lease(0);
  ASSERT_TRUE(protocol.acquire_for_fill(1, [] { return true; }));
  protocol.publish(1, kReady);  // ready but never taken
  // Abandon: ids 1..3 are cancelled. Slot 0 is still leased by batch 0, so
  // the new plan skips id 4 (slot 0) and starts at 5.
  EXPECT_EQ(protocol.publish_plan(1, 10, 40, 1), 5u);
  EXPECT_EQ(ring->slot(1).state.load(), state_word(5, 2, kFree));
  // Batch 0's release skips the cancelled ids 2 and 4.
  protocol.release(0);
  EXPECT_EQ(ring->slot(0).state.load(), state_word(6, 2, kFree));
}

TEST(SlotProtocol, NewPlanStartsAtTheLongestRunOfUnleasedSlots) {
  auto ring = Ring::create(small_geometry(4));
  SlotProtocol protocol(*ring);
  protocol.publish_plan(0, 3, 12, 0);
  Claim claim;
  for (uint64_t id = 0; id < 3; ++id) {
    ASSERT_TRUE(protocol.try_claim(claim));
    ASSERT_TRUE(protocol.acquire_for_fill(id, [] { return true; }));
    protocol.publish(id, kReady);
    protocol.lease(id);
  }
  protocol.release(0);
  protocol.release(1);  // batch 2 (slot 2) is still held
  // Next id would be 3 (slot 3): run 3 -> 0 -> 1 before slot 2: already the
  // longest, so no skip.
  EXPECT_EQ(protocol.publish_plan(1, 4, 16, 1), 3u);
}

// A node loader's ring (node_loader.cc): ids must stay contiguous across
// epochs even when the caller still leases the next id's slot.
TEST(SlotProtocol, AContiguousPlanDoesNotSkipLeasedSlots) {
  for (auto start : {SlotProtocol::PlanStart::kSkipLeased, SlotProtocol::PlanStart::kContiguous}) {
    auto ring = Ring::create(small_geometry(4));
    SlotProtocol protocol(*ring);
    protocol.publish_plan(0, 4, 16, 0);
    Claim claim;
    for (uint64_t id = 0; id < 4; ++id) {
      ASSERT_TRUE(protocol.try_claim(claim));
      ASSERT_TRUE(protocol.acquire_for_fill(id, [] { return true; }));
      protocol.publish(id, kReady);
      protocol.lease(id);
    }
    for (uint64_t id : {1, 2, 3}) protocol.release(id);  // batch 0 (slot 0) still held
    const uint64_t first = protocol.publish_plan(1, 4, 16, 1, start);
    EXPECT_EQ(first, start == SlotProtocol::PlanStart::kContiguous ? 4u : 5u);
  }
}

// Fillers write the batch id into every byte-group of their slot; the
// consumer checks order and content while plans are abandoned at random.
TEST(SlotProtocol, ConcurrentFillersDeliverEveryLiveBatchOnceInOrder) {
  constexpr uint32_t kSlots = 3;
  auto ring = Ring::create(small_geometry(kSlots));
  SlotProtocol protocol(*ring);
  std::atomic<bool> stop{false};
  auto filler = [&] {
    while (!stop.load(std::memory_order_acquire)) {
      uint32_t signal = ring->claims().plan_signal.load(std::memory_order_acquire);
      Claim claim;
      if (!protocol.try_claim(claim)) {
        futex_wait(ring->claims().plan_signal, signal, 1'000'000);
        continue;
      }
      if (!protocol.acquire_for_fill(claim.batch_id, [&] {
            return !stop.load(std::memory_order_acquire);
          })) {
        continue;
      }
      uint32_t slot = slot_of(claim.batch_id, kSlots);
      std::memcpy(ring->slot_data(slot), &claim.batch_id, sizeof(uint64_t));
      ring->slot_targets(slot)[0] = static_cast<int64_t>(claim.local_index);
      protocol.publish(claim.batch_id, kReady);
    }
  };
  std::vector<std::thread> fillers;
  for (int i = 0; i < 3; ++i) fillers.emplace_back(filler);

  std::mt19937 random(7);
  uint64_t delivered = 0;
  for (int epoch = 0; epoch < 60; ++epoch) {
    const uint64_t count = 1 + random() % 12;
    const uint64_t stop_after = random() % 3 == 0 ? random() % count : count;
    uint64_t first = protocol.publish_plan(epoch, count, count * 4, epoch % 2);
    for (uint64_t local = 0; local < stop_after; ++local) {
      uint64_t id = first + local;
      SlotControl& slot = ring->slot(slot_of(id, kSlots));
      for (;;) {
        uint32_t state = slot.state.load(std::memory_order_acquire);
        if (state == state_word(id, kSlots, kReady)) break;
        futex_wait(slot.state, state, 1'000'000);
      }
      protocol.lease(id);
      uint64_t written = 0;
      std::memcpy(&written, ring->slot_data(slot_of(id, kSlots)), sizeof(written));
      ASSERT_EQ(written, id) << "epoch " << epoch;
      ASSERT_EQ(ring->slot_targets(slot_of(id, kSlots))[0],
                static_cast<int64_t>(local));
      protocol.release(id);
      ++delivered;
    }
  }
  stop.store(true, std::memory_order_release);
  for (uint32_t s = 0; s < kSlots; ++s) futex_wake_all(ring->slot(s).state);
  futex_wake_all(ring->claims().plan_signal);
  for (auto& thread : fillers) thread.join();
  EXPECT_GT(delivered, 100u);
}

TEST(SlotProtocol, ClaimIntentIsWrittenBeforeTheClaim) {
  auto ring = Ring::create(small_geometry(2));
  SlotProtocol protocol(*ring);
  protocol.publish_plan(0, 3, 10, 0);
  std::atomic<uint64_t> intent{kNoBatch};
  Claim claim;
  ASSERT_TRUE(protocol.try_claim(claim, &intent));
  EXPECT_EQ(intent.load(std::memory_order_relaxed), claim.batch_id);
  EXPECT_EQ(protocol.claimed_end(), 1u);
}

TEST(SlotProtocol, RedoEntriesAreRebuiltAsClaimsOfTheCurrentPlan) {
  auto ring = Ring::create(small_geometry(2));
  SlotProtocol protocol(*ring);
  protocol.publish_plan(4, 6, 22, 1);
  std::atomic<uint64_t> intent{kNoBatch};
  Claim claim;
  EXPECT_FALSE(protocol.try_take_redo(claim, intent));
  ASSERT_TRUE(protocol.push_redo(3));
  EXPECT_TRUE(protocol.redo_queued(3));
  ASSERT_TRUE(protocol.try_take_redo(claim, intent));
  EXPECT_EQ(claim.batch_id, 3u);
  EXPECT_EQ(claim.local_index, 3u);
  EXPECT_EQ(claim.epoch, 4u);
  EXPECT_EQ(claim.sample_count, 22u);
  EXPECT_EQ(claim.order_table, 1u);
  EXPECT_EQ(intent.load(std::memory_order_relaxed), 3u);
  EXPECT_FALSE(protocol.redo_queued(3));
  // An entry from an abandoned epoch is dropped, not handed out.
  while (protocol.try_claim(claim)) {
  }
  ASSERT_TRUE(protocol.push_redo(5));
  protocol.publish_plan(5, 6, 22, 0);
  EXPECT_FALSE(protocol.try_take_redo(claim, intent));
  // The queue has room for kRedoEntries ids; the trainer keeps the rest.
  for (uint32_t i = 0; i < kRedoEntries; ++i) EXPECT_TRUE(protocol.push_redo(7 + i));
  EXPECT_FALSE(protocol.push_redo(99));
}

// Threads racing for redo entries and fresh claims: every id is taken
// exactly once (TSan checks the orders on the way).
TEST(SlotProtocol, RedoEntriesAndClaimsAreEachTakenOnce) {
  constexpr uint64_t kBatches = 400;
  RingGeometry geometry = small_geometry(4);
  geometry.order_capacity = kBatches * 4;  // a plan must fit its order table
  auto ring = Ring::create(geometry);
  SlotProtocol protocol(*ring);
  protocol.publish_plan(0, kBatches, kBatches * 4, 0);
  // Pretend ids 0..7 were owned by workers that died: claim them away and
  // queue them again, as the trainer's recovery does.
  Claim claim;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(protocol.try_claim(claim));
  for (uint64_t id = 0; id < 8; ++id) ASSERT_TRUE(protocol.push_redo(id));
  std::vector<std::atomic<int>> taken(kBatches);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::atomic<uint64_t> intent{kNoBatch};
      Claim mine;
      for (;;) {
        if (!protocol.try_take_redo(mine, intent) && !protocol.try_claim(mine, &intent)) {
          return;
        }
        taken[mine.batch_id].fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (uint64_t id = 0; id < kBatches; ++id) {
    EXPECT_EQ(taken[id].load(std::memory_order_relaxed), 1) << "batch " << id;
  }
}

}  // namespace
}  // namespace ringloader::ring
