// SPDX-License-Identifier: BSD-3-Clause
// The node's attach thread: accepts trainers on the node's socket, gives
// each its lane (and the region's memfd), and watches their connections.
// A connection that closes (the trainer exited, was killed, or dropped its
// AttachedLoader and every batch of it) detaches the lane and reclaims the
// slots it held, so the node's serve thread never waits on a dead trainer.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loader/node/lane_protocol.h"
#include "loader/node/node_layout.h"

namespace ringloader::node {

struct AttachCounts {
  int64_t attaches = 0;
  int64_t detaches = 0;
  int64_t reclaimed_slots = 0;
};

class AttachListener {
 public:
  // Takes `listen_fd` (node_socket.h's listen_on(name)) and starts the
  // thread. `shared_fds` (the region's memfd, then for host lanes the
  // ring's) are sent to each trainer, not owned; `lanes` are the lanes'
  // protocols.
  AttachListener(const std::string& name, int listen_fd, std::vector<int> shared_fds,
                 std::vector<LaneProtocol> lanes);
  // Stops the thread and closes every connection (trainers see the node go).
  ~AttachListener();
  AttachListener(const AttachListener&) = delete;
  AttachListener& operator=(const AttachListener&) = delete;

  // Any thread.
  AttachCounts counts() const;
  std::vector<int> trainer_pids() const;

 private:
  void run();
  void accept_trainers();
  void attach(int socket);
  void count_attach(int change);
  void detach(size_t lane);
  bool refuse(int socket, int lane, const std::string& why);

  std::string name_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop
  std::vector<int> shared_fds_;
  std::vector<LaneProtocol> lanes_;
  std::vector<int> connections_;  // per lane, -1 when detached
  mutable std::mutex mutex_;      // counts_
  AttachCounts counts_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace ringloader::node
