// SPDX-License-Identifier: BSD-3-Clause
// The node's attach thread: accepts trainers on the node's socket, checks
// who they are (SO_PEERCRED: the node's uid, or a member of the allowed
// group), gives each its lane (the read-only region, a fresh control memfd,
// the read-only ring) and watches them. The lane is detached when the
// trainer process dies (its pidfd: a fork child that inherited the socket
// does not keep a dead trainer's lane), when its connection closes (it
// dropped its AttachedLoader and every batch), or when its lane found a
// protocol violation (node_lane.h); the slots it held are reclaimed, so the
// node's serve thread never waits on a dead or hostile trainer. Nothing on
// this thread blocks on a peer: an admitted connection's request is read
// as it arrives (pending_attaches.h), replies are sent without waiting,
// accepts are bounded per wake-up, so neither a silent peer nor a flood of
// connections delays another trainer's attach, a detach or a violation.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loader/node/node_lane.h"
#include "loader/node/node_layout.h"
#include "loader/node/pending_attaches.h"

namespace ringloader::node {

struct AttachCounts {
  int64_t attaches = 0;
  int64_t detaches = 0;
};

// Who may attach: the node's own uid, and members of `group` if set.
struct AttachPolicy {
  uid_t uid = 0;
  bool group_allowed = false;
  gid_t group = 0;
};

// What lane `lane`'s trainer alone receives in its attach reply: the CUDA
// IPC handle of the lane's device memory; zeros for host lanes.
using LaneHandleSource = std::function<LaneHandle(uint32_t lane)>;

// The reply that admits a trainer to `lane`, with that lane's handle only.
AttachReply accepted_reply(int lane, const LaneHandle& handle);

// Accepts taken from the listening socket per wake-up: the rest wait for
// the next turn, after detaches and violations.
inline constexpr int kAcceptsPerWake = 16;

class AttachListener {
 public:
  // Takes `listen_fd` (node_socket.h's listen_on(name)) and starts the
  // thread. `shared_fds` (the region's read-only memfd, then for host lanes
  // the ring's) are sent to each trainer, not owned; `lanes` and `headers`
  // (the region's LaneHeaders) outlive the listener. `handles` (may be
  // empty: host lanes) gives each lane's handle for its reply.
  AttachListener(const std::string& name, int listen_fd, std::vector<int> shared_fds,
                 std::vector<NodeLane*> lanes, LaneHeader* headers, AttachPolicy policy,
                 LaneHandleSource handles = {}, PendingLimits limits = {});
  // Stops the thread and closes every connection (trainers see the node go).
  ~AttachListener();
  AttachListener(const AttachListener&) = delete;
  AttachListener& operator=(const AttachListener&) = delete;

  // Any thread, async-signal-safe: wakes the thread to collect violations.
  void notify();
  // Any thread.
  AttachCounts counts() const;
  std::vector<int> trainer_pids() const;

 private:
  void run();
  void accept_trainers(int64_t now_ns);
  void answer(int socket, const AttachRequest& request);
  void count(int attaches, int detaches);
  void detach(size_t lane, const std::string& violation);
  void collect_violations();
  void refuse(int socket, int lane, const std::string& why);
  // Empty, or why not; `peer` gets the peer's credentials.
  std::string admitted(int socket, PeerCredentials* peer) const;
  // At most one line a second: any uid can connect as fast as it likes.
  void log_refusal(const std::string& why, int64_t now_ns);

  std::string name_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop, or a lane's violation
  std::vector<int> shared_fds_;
  std::vector<NodeLane*> lanes_;
  LaneHeader* headers_;
  AttachPolicy policy_;
  LaneHandleSource handles_;
  PendingAttaches pending_;
  int64_t last_refusal_log_ns_ = 0;
  int64_t unlogged_refusals_ = 0;
  std::vector<int> connections_;  // per lane, -1 when detached
  std::vector<int> pidfds_;       // per lane: the trainer process, -1 when none
  mutable std::mutex mutex_;      // counts_
  AttachCounts counts_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace ringloader::node
