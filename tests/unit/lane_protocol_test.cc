// SPDX-License-Identifier: BSD-3-Clause
// The node's lane fences (loader/node/lane_protocol.h) and its attach socket
// (loader/node/node_socket.h), without a node: a producer thread stands in
// for the node, a consumer thread for the trainer.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "loader/node/lane_protocol.h"
#include "loader/node/node_socket.h"
#include "loader/ring/shared_region.h"
#include "ringloader/errors.h"

namespace ringloader::node {
namespace {

struct Lane {
  LaneHeader header{};
  std::vector<LaneSlot> slots;
  explicit Lane(uint32_t count) : slots(count) {
    for (LaneSlot& slot : slots) slot.state.store(0, std::memory_order_relaxed);
    header.next_lease.store(0, std::memory_order_relaxed);
    header.trainer_pid.store(0, std::memory_order_relaxed);
  }
  LaneProtocol protocol() { return LaneProtocol(header, slots.data(), slots.size()); }
};

TEST(LaneProtocol, AFreshLaneIsFreeForItsFirstBatchesOnly) {
  Lane lane(3);
  LaneProtocol protocol = lane.protocol();
  for (uint64_t n = 0; n < 3; ++n) EXPECT_TRUE(protocol.free_for(n));
  // Batch 3 shares slot 0 with batch 0 but is a later generation.
  EXPECT_FALSE(protocol.free_for(3));
  EXPECT_FALSE(protocol.ready(0));
}

TEST(LaneProtocol, ABatchIsReadyOnlyForItsOwnGeneration) {
  Lane lane(2);
  LaneProtocol protocol = lane.protocol();
  protocol.publish(0, 4, 7, 0);
  EXPECT_TRUE(protocol.ready(0));
  EXPECT_FALSE(protocol.ready(2));  // same slot, next generation
  protocol.lease(0);
  EXPECT_EQ(lane.header.next_lease.load(), 1u);
  EXPECT_FALSE(protocol.free_for(2));
  protocol.release(0);
  EXPECT_TRUE(protocol.free_for(2));
  EXPECT_FALSE(protocol.free_for(0));
}

TEST(LaneProtocol, ProducerAndConsumerKeepOrderThroughTwoSlots) {
  Lane lane(2);
  LaneProtocol protocol = lane.protocol();
  constexpr uint64_t kBatches = 20000;
  std::vector<int64_t> payload(2, -1);  // the "data" of each slot
  std::thread producer([&] {
    for (uint64_t n = 0; n < kBatches; ++n) {
      while (!protocol.wait_free(n, 10'000'000)) {
      }
      payload[protocol.slot_index(n)] = static_cast<int64_t>(n);
      protocol.publish(n, 1, 0, static_cast<int64_t>(n));
    }
  });
  uint64_t wrong = 0;
  for (uint64_t n = 0; n < kBatches; ++n) {
    while (!protocol.wait_ready(n, 10'000'000)) {
    }
    protocol.lease(n);
    if (payload[protocol.slot_index(n)] != static_cast<int64_t>(n) ||
        protocol.slot_for(n).index != static_cast<int64_t>(n)) {
      ++wrong;
    }
    protocol.release(n);
  }
  producer.join();
  EXPECT_EQ(wrong, 0u);
}

TEST(LaneProtocol, ReclaimFreesLeasedSlotsAndKeepsUnreadOnes) {
  Lane lane(3);
  LaneProtocol protocol = lane.protocol();
  for (uint64_t n = 0; n < 3; ++n) protocol.publish(n, 1, 0, n);
  protocol.lease(0);  // the trainer died holding batch 0
  EXPECT_EQ(protocol.reclaim(), 1);
  EXPECT_TRUE(protocol.free_for(3));
  // Batches 1 and 2 were never leased: the next trainer reads them.
  EXPECT_TRUE(protocol.ready(1));
  EXPECT_TRUE(protocol.ready(2));
  EXPECT_EQ(lane.header.next_lease.load(), 1u);
  EXPECT_EQ(protocol.reclaim(), 0);  // idempotent
}

TEST(LaneProtocol, ReclaimFreesABatchLeasedHalfway) {
  Lane lane(2);
  LaneProtocol protocol = lane.protocol();
  protocol.publish(0, 1, 0, 0);
  protocol.publish(1, 1, 0, 1);
  // A trainer that died between its two stores: next_lease moved, the
  // state still READY.
  lane.header.next_lease.store(1, std::memory_order_release);
  EXPECT_EQ(protocol.reclaim(), 1);
  EXPECT_TRUE(protocol.free_for(2));
  EXPECT_TRUE(protocol.ready(1));
}

// What host lanes use to drop the node's ring batch behind a slot.
TEST(LaneProtocol, ASlotIsFreeOnlyOnceItsBatchIsReleasedOrReclaimed) {
  Lane lane(2);
  LaneProtocol protocol = lane.protocol();
  EXPECT_TRUE(protocol.slot_free(0));
  protocol.publish(0, 1, 0, 0);
  protocol.publish(1, 1, 0, 1);
  EXPECT_FALSE(protocol.slot_free(0));  // READY
  protocol.lease(0);
  protocol.lease(1);
  EXPECT_FALSE(protocol.slot_free(0));  // LEASED
  protocol.release(0);
  EXPECT_TRUE(protocol.slot_free(0));
  EXPECT_FALSE(protocol.slot_free(1));
  EXPECT_EQ(protocol.reclaim(), 1);
  EXPECT_TRUE(protocol.slot_free(1));
}

TEST(LaneProtocol, ReleasedSlotsAreNotReclaimed) {
  Lane lane(2);
  LaneProtocol protocol = lane.protocol();
  protocol.publish(0, 1, 0, 0);
  protocol.lease(0);
  protocol.release(0);
  EXPECT_EQ(protocol.reclaim(), 0);
  EXPECT_TRUE(protocol.free_for(2));
}

TEST(LaneProtocol, TheLayoutHoldsInSharedMemory) {
  // Another process maps the same bytes: a memfd-backed lane works as the
  // in-process one (and the atomics are lock-free words).
  static_assert(std::atomic<uint32_t>::is_always_lock_free);
  static_assert(std::atomic<uint64_t>::is_always_lock_free);
  auto region = ring::SharedRegion::create("lane-test", sizeof(LaneHeader) + 2 * sizeof(LaneSlot));
  auto* header = static_cast<LaneHeader*>(region.data());
  auto* slots = reinterpret_cast<LaneSlot*>(header + 1);
  LaneProtocol protocol(*header, slots, 2);
  protocol.publish(0, 5, 1, 0);
  EXPECT_EQ(slots[0].rows, 5u);
  EXPECT_TRUE(protocol.ready(0));
}

TEST(NodeSocket, NamesAreChecked) {
  EXPECT_NO_THROW(check_node_name("imagenet-train.v2_0"));
  EXPECT_THROW(check_node_name(""), OptionError);
  EXPECT_THROW(check_node_name("a/b"), OptionError);
  EXPECT_THROW(check_node_name(std::string(81, 'a')), OptionError);
}

TEST(NodeSocket, ANameHasOneOwner) {
  const std::string name = "lane-test-" + std::to_string(getpid());
  int first = listen_on(name);
  EXPECT_THROW(listen_on(name), OptionError);
  close(first);
  int again = listen_on(name);  // gone with its socket: no file left behind
  close(again);
}

TEST(NodeSocket, NoNodeIsAClearErrorAfterTheTimeout) {
  const std::string name = "lane-test-absent-" + std::to_string(getpid());
  try {
    connect_to(name, 0.1);
    FAIL() << "connected to a node that does not exist";
  } catch (const NodeError& error) {
    EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
  }
}

TEST(NodeSocket, MessagesCarryDescriptorsAndThePeerIsKnown) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  auto region = ring::SharedRegion::create("lane-test-fd", 4096);
  auto ring = ring::SharedRegion::create("lane-test-ring", 8192);
  std::memcpy(region.data(), "fence", 6);
  std::memcpy(ring.data(), "slots", 6);
  AttachRequest request{kAttachMagic, kAttachVersion, 3, 0};
  ASSERT_TRUE(send_message(pair[0], &request, sizeof(request), {region.fd(), ring.fd()}));
  AttachRequest got{};
  std::vector<int> fds;
  ASSERT_TRUE(receive_message(pair[1], &got, sizeof(got), &fds));
  EXPECT_EQ(got.lane, 3);
  ASSERT_EQ(fds.size(), 2u);
  auto shared_region = ring::SharedRegion::attach(fds[0]);  // the same pages, in order
  auto shared_ring = ring::SharedRegion::attach(fds[1]);
  EXPECT_STREQ(static_cast<const char*>(shared_region.data()), "fence");
  EXPECT_STREQ(static_cast<const char*>(shared_ring.data()), "slots");
  EXPECT_EQ(shared_ring.size(), 8192u);
  // No descriptors is fine too; more than kMaxPassedFds is refused.
  ASSERT_TRUE(send_message(pair[0], &request, sizeof(request)));
  ASSERT_TRUE(receive_message(pair[1], &got, sizeof(got), &fds));
  EXPECT_TRUE(fds.empty());
  EXPECT_FALSE(send_message(pair[0], &request, sizeof(request),
                            {region.fd(), ring.fd(), region.fd()}));
  EXPECT_EQ(peer_pid(pair[1]), getpid());
  EXPECT_FALSE(peer_gone(pair[1]));
  close(pair[0]);
  EXPECT_TRUE(peer_gone(pair[1]));
  EXPECT_FALSE(receive_message(pair[1], &got, sizeof(got), &fds));
  EXPECT_TRUE(fds.empty());
  close(pair[1]);
}

}  // namespace
}  // namespace ringloader::node
