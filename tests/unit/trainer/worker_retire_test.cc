// SPDX-License-Identifier: BSD-3-Clause
// Retiring a worker (the autotuner's way back from a worker that did not
// pay): it claims nothing more, and its clean exit is not a death to
// recover; a retired worker that dies instead is reported as usual.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "loader/ring/ring.h"
#include "loader/ring/shared_region.h"
#include "loader/ring/slot_protocol.h"
#include "loader/trainer/worker_pool.h"
#include "loader/worker/claim_loop.h"

namespace ringloader::trainer {
namespace {

ring::RingGeometry geometry() {
  ring::RingGeometry g;
  g.slot_count = 2;
  g.worker_capacity = 3;
  g.batch_size = 4;
  g.sample_bytes = 16;
  g.order_capacity = 64;
  return g;
}

TEST(WorkerRetire, ARetiredWorkerClaimsNothingMore) {
  auto ring = ring::Ring::create(geometry());
  ring::SlotProtocol protocol(*ring);
  protocol.publish_plan(0, 4, 16, 0);
  ring::WorkerControl& control = ring->worker(0);
  auto first = worker::claim_next_batch(*ring, protocol, control, [] { return true; });
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->batch_id, 0u);
  control.retire.store(1, std::memory_order_release);
  auto none = worker::claim_next_batch(*ring, protocol, control, [] { return true; });
  EXPECT_FALSE(none.has_value());
  EXPECT_EQ(protocol.claimed_end(), 1u);  // batch 1 is left for the others
}

std::vector<WorkerExit> reap_until(WorkerPool& pool, size_t count) {
  std::vector<WorkerExit> exits;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (exits.size() < count && std::chrono::steady_clock::now() < deadline) {
    for (const WorkerExit& exit : pool.reap()) exits.push_back(exit);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exits;
}

TEST(WorkerRetire, CleanExitOfARetiredWorkerIsNoDeath) {
  auto ring = ring::Ring::create(geometry());
  int config_fd = ring::SharedRegion::create_text_fd("ringloader-test-config", "{}");
  // Stand-ins that exit 0 soon, as a retired worker does.
  WorkerPool pool(*ring, config_fd, 2, {"/bin/sh", "-c", "sleep 0.2"});
  pool.add_worker();
  ASSERT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.live_workers(), 3);
  pool.retire_worker(2);
  EXPECT_EQ(ring->worker(2).retire.load(), 1u);
  EXPECT_EQ(pool.live_workers(), 2);
  // Workers 0 and 1 were not retired: their exits are reported; 2's is not.
  std::vector<WorkerExit> exits = reap_until(pool, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (const WorkerExit& exit : pool.reap()) exits.push_back(exit);
  ASSERT_EQ(exits.size(), 2u);
  for (const WorkerExit& exit : exits) EXPECT_NE(exit.index, 2);
  EXPECT_EQ(pool.pid(2), -1);
  close(config_fd);
}

TEST(WorkerRetire, ARetiredWorkerThatDiesIsReported) {
  auto ring = ring::Ring::create(geometry());
  int config_fd = ring::SharedRegion::create_text_fd("ringloader-test-config", "{}");
  WorkerPool pool(*ring, config_fd, 2, {"/bin/sh", "-c", "sleep 30"});
  pool.retire_worker(1);
  ASSERT_EQ(kill(pool.pid(1), SIGKILL), 0);
  std::vector<WorkerExit> exits = reap_until(pool, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].index, 1);
  pool.respawn(1);  // what recovery does; the replacement is not retired
  EXPECT_EQ(ring->worker(1).retire.load(), 0u);
  EXPECT_EQ(pool.live_workers(), 2);
  close(config_fd);
}

}  // namespace
}  // namespace ringloader::trainer
