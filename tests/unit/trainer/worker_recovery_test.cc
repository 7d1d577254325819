// SPDX-License-Identifier: BSD-3-Clause
// WorkerRecovery's decisions against real processes standing in for workers
// (`sh -c 'sleep 30'`): the ring's worker entries are set by the test, so a
// race window is a state the test builds, not one it waits to happen.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "loader/ring/ring.h"
#include "loader/ring/shared_region.h"
#include "loader/ring/slot_protocol.h"
#include "loader/trainer/worker_pool.h"
#include "loader/trainer/worker_recovery.h"

namespace ringloader::trainer {
namespace {

ring::RingGeometry two_worker_geometry() {
  ring::RingGeometry geometry;
  geometry.slot_count = 2;
  geometry.worker_capacity = 2;
  geometry.batch_size = 4;
  geometry.sample_bytes = 16;
  geometry.order_capacity = 64;
  return geometry;
}

// Worker 0 owns batch 0 (FILLING) and is killed at the instant worker 1's
// claim CAS for batch 0 has lost but its intent still names it. The batch
// must not be lost to that instant: once worker 1 lets go, it is re-done.
TEST(WorkerRecovery, BatchALosingClaimerNamedIsRedoneOnceItLetsGo) {
  auto ring = ring::Ring::create(two_worker_geometry());
  ring::SlotProtocol protocol(*ring);
  int config_fd = ring::SharedRegion::create_text_fd("ringloader-test-config", "{}");
  WorkerPool pool(*ring, config_fd, 2, {"/bin/sh", "-c", "sleep 30"});
  WorkerRecovery recovery(*ring, protocol, pool, RecoveryOptions{},
                          [](int64_t index) { return "sample " + std::to_string(index); });
  protocol.publish_plan(0, 4, 16, 0);
  ring::WorkerControl& owner = ring->worker(0);
  ring::WorkerControl& loser = ring->worker(1);
  owner.ready.store(1);
  loser.ready.store(1);
  ring::Claim claim;
  ASSERT_TRUE(protocol.try_claim(claim, &owner.current_batch));
  ASSERT_EQ(claim.batch_id, 0u);
  ASSERT_TRUE(protocol.acquire_for_fill(0, [] { return true; }));
  loser.current_batch.store(0);  // lost its CAS for 0; not yet cleared

  const int owner_pid = pool.pid(0);
  ASSERT_EQ(kill(owner_pid, SIGKILL), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pool.pid(0) == owner_pid && std::chrono::steady_clock::now() < deadline) {
    recovery.check();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(pool.pid(0), owner_pid) << "the killed worker was not replaced";
  EXPECT_FALSE(protocol.redo_queued(0));  // a live worker names it: not yet

  loser.current_batch.store(ring::kNoBatch);  // the loser lets go
  recovery.check();
  EXPECT_TRUE(protocol.redo_queued(0)) << "batch 0 was lost";
  EXPECT_EQ(ring->slot(0).state.load(), ring::state_word(0, 2, ring::kFree));
  EXPECT_EQ(recovery.redone_batches(), 1);
  close(config_fd);
}

// A batch a live worker really owns is left to it: it publishes, and the
// dead worker's stale claim on it is dropped, not re-done.
TEST(WorkerRecovery, BatchALiveOwnerPublishesIsNotRedone) {
  auto ring = ring::Ring::create(two_worker_geometry());
  ring::SlotProtocol protocol(*ring);
  int config_fd = ring::SharedRegion::create_text_fd("ringloader-test-config", "{}");
  WorkerPool pool(*ring, config_fd, 2, {"/bin/sh", "-c", "sleep 30"});
  WorkerRecovery recovery(*ring, protocol, pool, RecoveryOptions{},
                          [](int64_t index) { return "sample " + std::to_string(index); });
  protocol.publish_plan(0, 4, 16, 0);
  ring::WorkerControl& dead = ring->worker(0);
  ring::WorkerControl& owner = ring->worker(1);
  dead.ready.store(1);
  owner.ready.store(1);
  ring::Claim claim;
  ASSERT_TRUE(protocol.try_claim(claim, &owner.current_batch));
  ASSERT_TRUE(protocol.acquire_for_fill(0, [] { return true; }));
  dead.current_batch.store(0);  // died right after losing its CAS for 0

  const int dead_pid = pool.pid(0);
  ASSERT_EQ(kill(dead_pid, SIGKILL), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pool.pid(0) == dead_pid && std::chrono::steady_clock::now() < deadline) {
    recovery.check();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(pool.pid(0), dead_pid);
  EXPECT_EQ(ring::phase_of(ring->slot(0).state.load()), ring::kFilling);  // untouched
  protocol.publish(0, ring::kReady);
  owner.current_batch.store(ring::kNoBatch);
  recovery.check();
  EXPECT_FALSE(protocol.redo_queued(0));
  EXPECT_EQ(ring->slot(0).state.load(), ring::state_word(0, 2, ring::kReady));
  EXPECT_EQ(recovery.redone_batches(), 0);
  close(config_fd);
}

}  // namespace
}  // namespace ringloader::trainer
