// SPDX-License-Identifier: BSD-3-Clause
// Race windows of the ring protocol, hit deterministically: a fault point
// (loader/ring/fault_point.h) runs the rival's move at the exact instruction
// where a real race would interleave it, and fork() plays a trainer's child.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "loader/ring/fault_point.h"
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

// The rival worker that wins the claim race (a plain function: hooks are
// function pointers).
const SlotProtocol* g_rival = nullptr;
std::atomic<uint64_t>* g_rival_intent = nullptr;
bool g_rival_claimed = false;

void rival_claims_first(const char* point) {
  if (std::strcmp(point, "claim.before_cas") != 0 || g_rival_claimed) return;
  g_rival_claimed = true;  // before the call: its own CAS passes here too
  Claim taken;
  ASSERT_TRUE(g_rival->try_claim(taken, g_rival_intent));
}

// A worker whose claim CAS loses must not go on naming the rival's batch:
// the trainer reads intents to decide who owns a dead worker's batch, and a
// stale one either hides the batch of a dead owner (never re-done: a hang)
// or makes a dead loser look like the owner of a batch a live worker fills.
TEST(FaultWindows, LostClaimRaceLeavesNoStaleIntent) {
  if (!fault::compiled_in()) GTEST_SKIP() << "built without RINGLOADER_FAULT_INJECTION";
  auto ring = Ring::create(small_geometry(2));
  SlotProtocol protocol(*ring);
  protocol.publish_plan(0, 1, 4, 0);  // one batch: the loser gets none
  std::atomic<uint64_t> loser{kNoBatch};
  std::atomic<uint64_t> winner{kNoBatch};
  g_rival = &protocol;
  g_rival_intent = &winner;
  g_rival_claimed = false;
  fault::set_hook(&rival_claims_first);
  Claim claim;
  bool claimed = protocol.try_claim(claim, &loser);
  fault::set_hook(nullptr);
  ASSERT_TRUE(g_rival_claimed);
  EXPECT_FALSE(claimed);
  EXPECT_EQ(winner.load(), 0u);
  EXPECT_EQ(loser.load(), kNoBatch) << "the loser still names batch " << loser.load();
}

// The same race with a second batch left: the loser retries and names the
// batch it really took.
TEST(FaultWindows, LostClaimRaceRetriesAndNamesTheBatchTaken) {
  if (!fault::compiled_in()) GTEST_SKIP() << "built without RINGLOADER_FAULT_INJECTION";
  auto ring = Ring::create(small_geometry(2));
  SlotProtocol protocol(*ring);
  protocol.publish_plan(0, 2, 8, 0);
  std::atomic<uint64_t> loser{kNoBatch};
  std::atomic<uint64_t> winner{kNoBatch};
  g_rival = &protocol;
  g_rival_intent = &winner;
  g_rival_claimed = false;
  fault::set_hook(&rival_claims_first);
  Claim claim;
  bool claimed = protocol.try_claim(claim, &loser);
  fault::set_hook(nullptr);
  ASSERT_TRUE(claimed);
  EXPECT_EQ(claim.batch_id, 1u);
  EXPECT_EQ(loser.load(), 1u);
  EXPECT_EQ(winner.load(), 0u);
}

// A trainer's forked child that drops a batch (its copy of the lease) must
// not hand the slot back: the parent still holds it, and a worker would
// overwrite the batch under the parent's tensors.
TEST(FaultWindows, ReleaseInAForkedChildLeavesTheSlotLeased) {
  auto ring = Ring::create(small_geometry(2));
  SlotProtocol protocol(*ring);
  protocol.publish_plan(0, 4, 16, 0);
  ASSERT_TRUE(protocol.acquire_for_fill(0, [] { return true; }));
  protocol.publish(0, kReady);
  protocol.lease(0);
  const uint32_t leased = state_word(0, 2, kLeased);
  std::fflush(nullptr);  // the child must not print the parent's buffered output
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    protocol.release(0);
    _exit(ring->slot(0).state.load() == leased ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's release freed the parent's slot";
  EXPECT_EQ(ring->slot(0).state.load(), leased);
  protocol.release(0);  // the owner's release still works
  EXPECT_EQ(ring->slot(0).state.load(), state_word(2, 2, kFree));
}

}  // namespace
}  // namespace ringloader::ring
