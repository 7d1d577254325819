// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/attach_listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "loader/node/node_socket.h"
#include "ringloader/errors.h"

namespace ringloader::node {

AttachListener::AttachListener(const std::string& name, int listen_fd,
                               std::vector<int> shared_fds, std::vector<LaneProtocol> lanes)
    : name_(name),
      listen_fd_(listen_fd),
      shared_fds_(std::move(shared_fds)),
      lanes_(std::move(lanes)),
      connections_(lanes_.size(), -1) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    close(listen_fd_);
    throw Error(std::string("ringloader: eventfd: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { run(); });
}

AttachListener::~AttachListener() {
  stopping_.store(true, std::memory_order_release);
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  for (int fd : connections_) {
    if (fd >= 0) close(fd);
  }
  close(listen_fd_);
  close(wake_fd_);
}

AttachCounts AttachListener::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

std::vector<int> AttachListener::trainer_pids() const {
  std::vector<int> pids;
  for (const LaneProtocol& lane : lanes_) {
    pids.push_back(lane.lane().trainer_pid.load(std::memory_order_acquire));
  }
  return pids;
}

void AttachListener::run() {
  while (!stopping_.load(std::memory_order_acquire)) {
    // [wake, listen, lane 0, lane 1, ...]; a detached lane polls fd -1
    // (ignored by poll).
    std::vector<pollfd> watch{{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (int fd : connections_) watch.push_back({fd, POLLRDHUP, 0});
    if (poll(watch.data(), watch.size(), -1) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "ringloader: node \"%s\": poll: %s\n", name_.c_str(),
                   std::strerror(errno));
      return;
    }
    if (watch[0].revents) return;
    for (size_t lane = 0; lane < connections_.size(); ++lane) {
      if (watch[lane + 2].revents & (POLLRDHUP | POLLHUP | POLLERR)) detach(lane);
    }
    if (watch[1].revents & POLLIN) accept_trainers();
  }
}

void AttachListener::accept_trainers() {
  for (;;) {
    int socket = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (socket < 0) return;  // EAGAIN: none left
    // A trainer that connects and says nothing must not stall the others.
    timeval timeout{2, 0};
    setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    attach(socket);
  }
}

bool AttachListener::refuse(int socket, int lane, const std::string& why) {
  AttachReply reply{};
  reply.magic = kAttachMagic;
  reply.accepted = 0;
  reply.lane = lane;
  reply.node_pid = getpid();
  std::snprintf(reply.message, sizeof(reply.message), "%s", why.c_str());
  send_message(socket, &reply, sizeof(reply));
  close(socket);
  return false;
}

void AttachListener::attach(int socket) {
  AttachRequest request{};
  std::vector<int> unexpected_fds;
  const bool received = receive_message(socket, &request, sizeof(request), &unexpected_fds);
  close_all(&unexpected_fds);
  if (!received || request.magic != kAttachMagic) {
    close(socket);
    return;
  }
  const int lane = request.lane;
  if (request.version != kAttachVersion) {
    refuse(socket, lane, "attach protocol version " + std::to_string(request.version) +
                             ", node speaks " + std::to_string(kAttachVersion) +
                             " (mixed ringloader versions)");
    return;
  }
  if (lane < 0 || static_cast<size_t>(lane) >= lanes_.size()) {
    refuse(socket, lane, "trainer " + std::to_string(lane) + " is out of range: node \"" +
                             name_ + "\" serves " + std::to_string(lanes_.size()) +
                             " trainers (NodeOptions::trainers)");
    return;
  }
  // A trainer that left and attaches again at once (a refused attach
  // retried) may connect while this thread still accepts, before run()
  // polled its hang-up.
  if (connections_[lane] >= 0 && peer_gone(connections_[lane])) detach(static_cast<size_t>(lane));
  if (connections_[lane] >= 0) {
    const int holder = lanes_[lane].lane().trainer_pid.load(std::memory_order_acquire);
    refuse(socket, lane, "trainer " + std::to_string(lane) + " is attached by pid " +
                             std::to_string(holder) + "; each trainer needs its own lane "
                             "(LOCAL_RANK)");
    return;
  }
  AttachReply reply{};
  reply.magic = kAttachMagic;
  reply.accepted = 1;
  reply.lane = lane;
  reply.node_pid = getpid();
  // Counted before the pid shows: whoever sees the pid in trainer_pids()
  // sees the attach in counts() too.
  count_attach(+1);
  lanes_[lane].lane().trainer_pid.store(peer_pid(socket), std::memory_order_release);
  if (!send_message(socket, &reply, sizeof(reply), shared_fds_)) {
    lanes_[lane].lane().trainer_pid.store(0, std::memory_order_release);
    count_attach(-1);
    close(socket);
    return;
  }
  connections_[lane] = socket;
}

void AttachListener::count_attach(int change) {
  std::lock_guard<std::mutex> lock(mutex_);
  counts_.attaches += change;
}

void AttachListener::detach(size_t lane) {
  close(connections_[lane]);
  connections_[lane] = -1;
  const int pid = lanes_[lane].lane().trainer_pid.load(std::memory_order_acquire);
  // The connection closes only once the trainer released everything or is
  // dead, so what it still holds is a dead trainer's.
  const int reclaimed = lanes_[lane].reclaim();
  {
    // Counted before the pid clears: whoever sees the lane free in
    // trainer_pids() sees its reclaimed slots in counts() too.
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_.detaches;
    counts_.reclaimed_slots += reclaimed;
  }
  lanes_[lane].lane().trainer_pid.store(0, std::memory_order_release);
  if (reclaimed > 0) {
    std::fprintf(stderr,
                 "ringloader: node \"%s\": trainer %zu (pid %d) left holding %d slot(s); "
                 "reclaimed (its batches are lost to that lane)\n",
                 name_.c_str(), lane, pid, reclaimed);
  }
}

}  // namespace ringloader::node
