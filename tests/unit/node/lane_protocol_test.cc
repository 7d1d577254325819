// SPDX-License-Identifier: BSD-3-Clause
// The node's lane fences (loader/node/lane_protocol.h, node_lane.h) and its
// attach socket (loader/node/node_socket.h), without a node: a NodeLane and
// a TrainerLane over a real control memfd, in threads of one process.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "loader/node/lane_control.h"
#include "loader/node/lane_protocol.h"
#include "loader/node/node_lane.h"
#include "loader/node/node_socket.h"
#include "loader/ring/shared_region.h"
#include "ringloader/errors.h"

namespace ringloader::node {
namespace {

// A node lane and the trainer's side of it, over a real control memfd.
struct Lane {
  std::vector<LaneSlot> slots;
  NodeLane node;
  ring::SharedRegion control;
  std::unique_ptr<TrainerLane> trainer;
  explicit Lane(uint32_t count) : slots(count), node(0, count, slots.data(), nullptr) {
    attach();
  }
  void attach() {
    control = ring::SharedRegion::attach(dup(node.attach()));
    trainer = std::make_unique<TrainerLane>(*static_cast<ControlHeader*>(control.data()),
                                            slots.data(), static_cast<uint32_t>(slots.size()));
  }
  ControlHeader& header() const { return *static_cast<ControlHeader*>(control.data()); }
  bool free_now() { return node.wait_free(0) == NodeLane::Wait::kFill; }
  void publish(int64_t index) {
    ASSERT_TRUE(free_now());
    slots[node.next_batch() % slots.size()].index = index;
    node.filled();
    node.published();
  }
  int detach() {
    int reclaimed = -1;
    std::string why;
    EXPECT_TRUE(node.detach(&reclaimed, &why)) << why;
    return reclaimed;
  }
};

TEST(LaneProtocol, AFreshLaneIsFreeForItsFirstBatchesOnly) {
  Lane lane(3);
  for (int64_t n = 0; n < 3; ++n) lane.publish(n);
  // Batch 3 shares slot 0 with batch 0, which is not consumed yet.
  EXPECT_EQ(lane.node.wait_free(0), NodeLane::Wait::kBusy);
  EXPECT_TRUE(lane.trainer->ready(0));
  EXPECT_FALSE(lane.trainer->ready(3));
}

TEST(LaneProtocol, ABatchIsReadyOnlyForItsOwnGeneration) {
  Lane lane(2);
  lane.publish(0);
  EXPECT_TRUE(lane.trainer->ready(0));
  EXPECT_FALSE(lane.trainer->ready(2));  // same slot, next generation
  lane.trainer->lease(0);
  EXPECT_EQ(lane.header().next_lease.load(), 1u);
  lane.publish(1);
  EXPECT_EQ(lane.node.wait_free(0), NodeLane::Wait::kBusy);  // batch 2 waits for 0
  lane.trainer->release(0);
  EXPECT_TRUE(lane.free_now());
}

TEST(LaneProtocol, ProducerAndConsumerKeepOrderThroughTwoSlots) {
  Lane lane(2);
  constexpr uint64_t kBatches = 20000;
  std::vector<int64_t> payload(2, -1);  // the "data" of each slot
  std::thread producer([&] {
    for (uint64_t n = 0; n < kBatches; ++n) {
      while (lane.node.wait_free(10'000'000) != NodeLane::Wait::kFill) {
      }
      payload[n % 2] = static_cast<int64_t>(n);
      lane.slots[n % 2].index = static_cast<int64_t>(n);
      lane.node.filled();
      lane.node.published();
    }
  });
  uint64_t wrong = 0;
  for (uint64_t n = 0; n < kBatches; ++n) {
    while (!lane.trainer->wait_ready(n, 10'000'000)) {
    }
    lane.trainer->lease(n);
    if (payload[n % 2] != static_cast<int64_t>(n) ||
        lane.trainer->slot_for(n).index != static_cast<int64_t>(n)) {
      ++wrong;
    }
    lane.trainer->release(n);
  }
  producer.join();
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(lane.node.counts().violations, 0);
}

TEST(LaneProtocol, ReclaimFreesLeasedSlotsAndKeepsUnreadOnes) {
  Lane lane(3);
  for (int64_t n = 0; n < 3; ++n) lane.publish(n);
  lane.trainer->lease(0);  // the trainer died holding batch 0
  EXPECT_EQ(lane.detach(), 1);
  EXPECT_EQ(lane.node.counts().reclaimed_slots, 1);
  EXPECT_TRUE(lane.free_now());  // batch 3, into batch 0's slot
  // Batches 1 and 2 were never leased: the next trainer reads them.
  lane.attach();
  EXPECT_EQ(lane.header().next_lease.load(), 1u);
  EXPECT_TRUE(lane.trainer->ready(1));
  EXPECT_TRUE(lane.trainer->ready(2));
  EXPECT_EQ(lane.detach(), 0);
}

TEST(LaneProtocol, ReclaimFreesABatchLeasedHalfway) {
  Lane lane(2);
  lane.publish(0);
  lane.publish(1);
  // A trainer that died between its two stores: next_lease moved, the
  // state still READY.
  lane.header().next_lease.store(1, std::memory_order_release);
  EXPECT_EQ(lane.detach(), 1);
  EXPECT_TRUE(lane.free_now());
  lane.attach();
  EXPECT_TRUE(lane.trainer->ready(1));
}

// What host lanes use to drop the node's ring batch behind a slot.
TEST(LaneProtocol, ASlotIsReleasedOnlyOnceItsBatchIsConsumed) {
  Lane lane(2);
  EXPECT_TRUE(lane.node.slot_released(0));  // nothing in it
  lane.publish(0);
  lane.publish(1);
  EXPECT_FALSE(lane.node.slot_released(0));  // READY
  lane.trainer->lease(0);
  lane.trainer->lease(1);
  EXPECT_FALSE(lane.node.slot_released(0));  // LEASED
  lane.trainer->release(0);
  EXPECT_TRUE(lane.node.slot_released(0));
  EXPECT_FALSE(lane.node.slot_released(1));
  EXPECT_EQ(lane.detach(), 1);
  EXPECT_TRUE(lane.node.slot_released(1));
}

TEST(LaneProtocol, ReleasedSlotsAreNotReclaimed) {
  Lane lane(2);
  lane.publish(0);
  lane.trainer->lease(0);
  lane.trainer->release(0);
  EXPECT_EQ(lane.detach(), 0);
  EXPECT_TRUE(lane.free_now());
}

TEST(LaneProtocol, AWordNoHonestTrainerWritesDetachesItAndTheLaneDrops) {
  Lane lane(2);
  lane.publish(0);
  lane.publish(1);
  // A wrong generation in batch 0's slot: the node would wait forever.
  lane.trainer->word_of(0).store(lane_state(6, 2, kLaneLeased));
  EXPECT_EQ(lane.node.wait_free(0), NodeLane::Wait::kDrop);
  EXPECT_EQ(lane.node.counts().violations, 1);
  EXPECT_NE(lane.node.take_violation().find("slot 0"), std::string::npos);
  lane.node.dropped();
  EXPECT_EQ(lane.node.counts().dropped_batches, 1);
  // Writes into the old control change nothing any more.
  lane.trainer->word_of(1).store(0xffffffffu);
  EXPECT_EQ(lane.node.wait_free(0), NodeLane::Wait::kDrop);
  lane.node.dropped();
  // A new trainer ends the drop: the lane starts afresh after batch 3.
  lane.attach();
  EXPECT_EQ(lane.header().next_lease.load(), 4u);
  EXPECT_TRUE(lane.free_now());
}

TEST(LaneProtocol, ANextLeaseBeyondWhatWasPublishedIsAViolation) {
  Lane lane(2);
  lane.publish(0);
  lane.header().next_lease.store(1u << 20, std::memory_order_release);
  int reclaimed = -1;
  std::string why;
  EXPECT_FALSE(lane.node.detach(&reclaimed, &why));
  EXPECT_NE(why.find("next_lease"), std::string::npos) << why;
  EXPECT_EQ(lane.node.counts().violations, 1);
  EXPECT_EQ(lane.node.wait_free(0), NodeLane::Wait::kDrop);
}

TEST(LaneProtocol, TheControlLayoutHoldsInSharedMemory) {
  // Another process maps the same bytes (and the atomics are lock-free).
  static_assert(std::atomic<uint32_t>::is_always_lock_free);
  static_assert(std::atomic<uint64_t>::is_always_lock_free);
  Lane lane(2);
  EXPECT_EQ(lane.control.size(), control_bytes(2));
  EXPECT_EQ(lane.header().magic, kControlMagic);
  EXPECT_EQ(lane.header().slots, 2u);
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

// One message of exactly `bytes` within 2 s, as the attach protocol reads.
bool receive_message(int socket, void* data, size_t bytes, std::vector<int>* fds) {
  PartialMessage message(bytes);
  const bool done =
      receive_until(socket, &message, std::chrono::steady_clock::now() + std::chrono::seconds(2)) ==
      ReadStep::kDone;
  *fds = std::move(message.fds);
  if (done) std::memcpy(data, message.data.data(), bytes);
  return done;
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
                            {region.fd(), ring.fd(), region.fd(), ring.fd()}));
  EXPECT_EQ(peer_pid(pair[1]), getpid());
  EXPECT_EQ(peer_credentials(pair[1]).uid, geteuid());
  EXPECT_TRUE(peer_in_group(pair[1], getegid()));
  const int pidfd = peer_pidfd(pair[1], getpid());
  if (pidfd >= 0) close(pidfd);
  EXPECT_FALSE(peer_gone(pair[1]));
  close(pair[0]);
  EXPECT_TRUE(peer_gone(pair[1]));
  EXPECT_FALSE(receive_message(pair[1], &got, sizeof(got), &fds));
  EXPECT_TRUE(fds.empty());
  close(pair[1]);
}

}  // namespace
}  // namespace ringloader::node
