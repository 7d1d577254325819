// SPDX-License-Identifier: BSD-3-Clause
// The node's attach thread (loader/node/attach_listener.h) against hostile
// admitted peers, without a node: real NodeLanes, a real listening socket,
// raw trainers speaking the attach protocol by hand. And the trainer's
// checks of a node's header (attach_checks.h) and the group option's parse.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "loader/node/attach_checks.h"
#include "loader/node/attach_listener.h"
#include "loader/node/node_lane.h"
#include "loader/node/node_socket.h"
#include "loader/ring/shared_region.h"
#include "ringloader/errors.h"

namespace ringloader::node {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A node's attach side: `lanes` lanes of 2 slots, lane k's handle 64 bytes
// of 0xA0 + k, a stand-in region memfd to send.
struct Node {
  std::string name;
  ring::SharedRegion region = ring::SharedRegion::create("attach-test-region", 4096);
  std::vector<LaneHeader> headers;
  std::vector<LaneSlot> slots;
  std::vector<std::unique_ptr<NodeLane>> lanes;
  std::unique_ptr<AttachListener> listener;

  Node(const std::string& what, uint32_t count)
      : name("attach-test-" + what + "-" + std::to_string(getpid())),
        headers(count),
        slots(count * 2) {
    std::vector<NodeLane*> pointers;
    for (uint32_t i = 0; i < count; ++i) {
      lanes.push_back(std::make_unique<NodeLane>(i, 2, &slots[i * 2], nullptr));
      pointers.push_back(lanes.back().get());
    }
    AttachPolicy policy;
    policy.uid = geteuid();
    listener = std::make_unique<AttachListener>(
        name, listen_on(name), std::vector<int>{region.fd()}, pointers, headers.data(), policy,
        [](uint32_t lane) { return handle_of(lane); });
  }
  ~Node() { listener.reset(); }

  static LaneHandle handle_of(uint32_t lane) {
    LaneHandle handle;
    handle.fill(static_cast<uint8_t>(0xA0 + lane));
    return handle;
  }
  // Waits up to `seconds` for lane `lane`'s trainer pid to be `pid`.
  bool pid_becomes(size_t lane, int pid, double seconds) const {
    const auto start = Clock::now();
    while (listener->trainer_pids()[lane] != pid) {
      if (seconds_since(start) > seconds) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
};

// A raw trainer: connects, asks for `lane`, reads the reply (5 s at most).
struct RawTrainer {
  int socket = -1;
  AttachReply reply{};
  std::vector<int> fds;
  bool answered = false;

  RawTrainer(const std::string& name, int lane) {
    socket = connect_to(name, 2);
    AttachRequest request{kAttachMagic, kAttachVersion, lane, 0};
    EXPECT_TRUE(send_message(socket, &request, sizeof(request)));
    PartialMessage message(sizeof(reply));
    answered = receive_until(socket, &message, Clock::now() + std::chrono::seconds(5)) ==
               ReadStep::kDone;
    if (answered) std::memcpy(&reply, message.data.data(), sizeof(reply));
    fds = std::move(message.fds);
  }
  ~RawTrainer() {
    close_all(&fds);
    if (socket >= 0) close(socket);
  }
};

TEST(AttachListener, EachTrainerGetsOnlyItsOwnLanesHandle) {
  Node node("handles", 3);
  std::vector<std::unique_ptr<RawTrainer>> trainers;
  for (int lane : {2, 0, 1}) {
    trainers.push_back(std::make_unique<RawTrainer>(node.name, lane));
    const RawTrainer& trainer = *trainers.back();
    ASSERT_TRUE(trainer.answered);
    ASSERT_EQ(trainer.reply.accepted, 1) << trainer.reply.message;
    EXPECT_EQ(trainer.reply.lane, lane);
    const LaneHandle mine = Node::handle_of(static_cast<uint32_t>(lane));
    EXPECT_EQ(std::memcmp(trainer.reply.memory_handle, mine.data(), mine.size()), 0);
    EXPECT_EQ(trainer.fds.size(), 2u);  // the region and its own control: no other lane's
  }
  // The memory every trainer maps (the lanes' headers) holds no handle,
  // nor any 8 bytes of one (a pid's bytes may be 0xA0..0xA2 by chance).
  const auto* bytes = reinterpret_cast<const uint8_t*>(node.headers.data());
  const size_t size = node.headers.size() * sizeof(LaneHeader);
  for (uint32_t lane = 0; lane < 3; ++lane) {
    const LaneHandle handle = Node::handle_of(lane);
    EXPECT_EQ(std::search(bytes, bytes + size, handle.begin(), handle.begin() + 8),
              bytes + size)
        << "lane " << lane << "'s handle is in the shared lane headers";
  }
  // A refused trainer (its lane is taken) gets no handle either.
  RawTrainer second(node.name, 1);
  ASSERT_TRUE(second.answered);
  EXPECT_EQ(second.reply.accepted, 0);
  const LaneHandle none{};
  EXPECT_EQ(std::memcmp(second.reply.memory_handle, none.data(), none.size()), 0);
  EXPECT_TRUE(second.fds.empty());
}

TEST(AttachListener, TheReplyBuilderCarriesOneLanesHandle) {
  const AttachReply reply = accepted_reply(5, Node::handle_of(5));
  EXPECT_EQ(reply.magic, kAttachMagic);
  EXPECT_EQ(reply.accepted, 1);
  EXPECT_EQ(reply.lane, 5);
  EXPECT_EQ(reply.node_pid, getpid());
  for (uint8_t byte : reply.memory_handle) EXPECT_EQ(byte, 0xA5);
}

// Connections that say nothing, one that stops halfway, and a peer that
// keeps reconnecting: the node's own uid (the worst case: it passes every
// admission check).
struct SilentPeers {
  std::vector<int> sockets;
  std::atomic<bool> stop{false};
  std::thread reconnecting;

  explicit SilentPeers(const std::string& name) {
    for (int i = 0; i < 5; ++i) sockets.push_back(connect_to(name, 2));
    sockets.push_back(connect_to(name, 2));
    AttachRequest request{kAttachMagic, kAttachVersion, 0, 0};
    EXPECT_EQ(send(sockets.back(), &request, 5, MSG_NOSIGNAL), 5);  // and no more
    reconnecting = std::thread([this, name] {
      while (!stop.load(std::memory_order_acquire)) {
        int fd = connect_to(name, 2);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        close(fd);
      }
    });
    // Let the node accept them all before the honest trainer comes.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ~SilentPeers() {
    stop.store(true, std::memory_order_release);
    reconnecting.join();
    for (int fd : sockets) close(fd);
  }
};

// The old attach thread read each connection with a blocking 2 s receive:
// five silent peers cost an honest trainer 10 s, a reconnecting one forever.
TEST(AttachListener, SilentPeersDelayNoAttach) {
  Node node("silent", 2);
  SilentPeers peers(node.name);
  const auto start = Clock::now();
  RawTrainer trainer(node.name, 1);
  const double took = seconds_since(start);
  ASSERT_TRUE(trainer.answered);
  EXPECT_EQ(trainer.reply.accepted, 1) << trainer.reply.message;
  EXPECT_LT(took, 1.0) << "an attach behind silent peers took " << took << " s";
}

TEST(AttachListener, SilentPeersDelayNoDetach) {
  Node node("detach", 2);
  auto trainer = std::make_unique<RawTrainer>(node.name, 0);
  ASSERT_EQ(trainer->reply.accepted, 1) << trainer->reply.message;
  ASSERT_TRUE(node.pid_becomes(0, getpid(), 2));
  SilentPeers peers(node.name);
  const auto start = Clock::now();
  trainer.reset();  // the trainer goes: its lane must be free at once
  EXPECT_TRUE(node.pid_becomes(0, 0, 5));
  const double took = seconds_since(start);
  EXPECT_LT(took, 1.0) << "a detach behind silent peers took " << took << " s";
}

TEST(AttachChecks, TheHeaderIsCopiedOnceAndEveryProductChecked) {
  // The example: channels 53237 x height 27211 x width 759 x
  // batch 16777215 wraps to 16 MB in 64 bits, a size that fits its ring.
  NodeHeader header{};
  header.magic = kNodeMagic;
  header.layout_version = kNodeLayoutVersion;
  header.lane_count = 1;
  header.lane_slots = 1;
  header.device = static_cast<uint32_t>(LaneDevice::kHost);
  header.batch_size = 16777215;
  header.batches_per_epoch = 1;
  header.channels = 53237;
  header.height = 27211;
  header.width = 759;
  const uint64_t wrapped = uint64_t{53237} * 27211 * 759 * 16777215;  // mod 2^64
  ASSERT_LT(wrapped, uint64_t{1} << 26);
  header.data_bytes = wrapped;
  const NodeGeometry geometry{1, 1, header.batch_size, wrapped, true};
  header.slot_data_bytes = geometry.slot_data_bytes();
  header.targets_offset = geometry.targets_offset();
  header.indices_offset = geometry.indices_offset();
  header.total_bytes = geometry.total_bytes();
  header.ring_bytes = uint64_t{1} << 30;
  const NodeFacts facts = copy_node_header(header);
  EXPECT_EQ(facts.batch_size, 16777215);
  EXPECT_EQ(facts.data_bytes, wrapped);
  try {
    check_node_facts(facts, geometry.total_bytes(), header.ring_bytes, 0, "node \"x\"");
    FAIL() << "a batch size that wraps 64 bits passed";
  } catch (const NodeError& error) {
    EXPECT_NE(std::string(error.what()).find("batch's size"), std::string::npos) << error.what();
  }
  // The same header with an honest shape passes.
  header.batch_size = 4;
  header.channels = 3;
  header.height = 8;
  header.width = 8;
  header.data_bytes = 4 * 3 * 8 * 8;
  const NodeGeometry honest{1, 1, 4, header.data_bytes, true};
  header.slot_data_bytes = honest.slot_data_bytes();
  header.targets_offset = honest.targets_offset();
  header.indices_offset = honest.indices_offset();
  header.total_bytes = honest.total_bytes();
  EXPECT_NO_THROW(check_node_facts(copy_node_header(header), honest.total_bytes(),
                                   header.ring_bytes, 0, "node \"x\""));
  // No slots: a slot index would divide by zero.
  header.lane_slots = 0;
  EXPECT_THROW(check_node_facts(copy_node_header(header), honest.total_bytes(),
                                header.ring_bytes, 0, "node \"x\""),
               NodeError);
}

TEST(NodeSocket, GroupNumbersAreParsedStrictly) {
  EXPECT_EQ(resolve_group("0", "NodeOptions::allow_group"), 0u);
  EXPECT_EQ(resolve_group("65534", "NodeOptions::allow_group"), 65534u);
  EXPECT_EQ(resolve_group("4294967294", "NodeOptions::allow_group"), 4294967294u);
  // strtoul took these for gids 0, 4294967295 ((gid_t)-1, no group) and 1.
  for (const char* bad : {"4294967296", "4294967295", "18446744073709551617"}) {
    try {
      resolve_group(bad, "NodeOptions::allow_group");
      FAIL() << bad << " was taken for a group";
    } catch (const OptionError& error) {
      const std::string what = error.what();
      EXPECT_NE(what.find("NodeOptions::allow_group"), std::string::npos) << what;
      EXPECT_NE(what.find(bad), std::string::npos) << what;
    }
  }
  // Not all digits: a name, which no machine has.
  EXPECT_THROW(resolve_group(" 5", "NodeOptions::allow_group"), OptionError);
  EXPECT_THROW(resolve_group("+5", "NodeOptions::allow_group"), OptionError);
}

}  // namespace
}  // namespace ringloader::node
