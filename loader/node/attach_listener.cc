// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/attach_listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "loader/node/node_socket.h"
#include "ringloader/errors.h"

namespace ringloader::node {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

AttachReply reply_header(int lane, int accepted) {
  AttachReply reply{};
  reply.magic = kAttachMagic;
  reply.accepted = accepted;
  reply.lane = lane;
  reply.node_pid = getpid();
  return reply;
}

}  // namespace

AttachReply accepted_reply(int lane, const LaneHandle& handle) {
  AttachReply reply = reply_header(lane, 1);
  std::memcpy(reply.memory_handle, handle.data(), sizeof(reply.memory_handle));
  return reply;
}

AttachListener::AttachListener(const std::string& name, int listen_fd,
                               std::vector<int> shared_fds, std::vector<NodeLane*> lanes,
                               LaneHeader* headers, AttachPolicy policy,
                               LaneHandleSource handles, PendingLimits limits)
    : name_(name),
      listen_fd_(listen_fd),
      shared_fds_(std::move(shared_fds)),
      lanes_(std::move(lanes)),
      headers_(headers),
      policy_(policy),
      handles_(std::move(handles)),
      pending_(limits),
      connections_(lanes_.size(), -1),
      pidfds_(lanes_.size(), -1) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    close(listen_fd_);
    throw Error(std::string("ringloader: eventfd: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { run(); });
}

AttachListener::~AttachListener() {
  stopping_.store(true, std::memory_order_release);
  notify();
  if (thread_.joinable()) thread_.join();
  for (size_t lane = 0; lane < lanes_.size(); ++lane) {
    if (connections_[lane] >= 0) close(connections_[lane]);
    if (pidfds_[lane] >= 0) close(pidfds_[lane]);
  }
  close(listen_fd_);
  close(wake_fd_);
}

void AttachListener::notify() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

AttachCounts AttachListener::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

std::vector<int> AttachListener::trainer_pids() const {
  std::vector<int> pids;
  for (size_t lane = 0; lane < lanes_.size(); ++lane) {
    pids.push_back(headers_[lane].trainer_pid.load(std::memory_order_acquire));
  }
  return pids;
}

void AttachListener::run() {
  const size_t lanes = lanes_.size();
  const size_t first_pending = 2 + 2 * lanes;
  while (!stopping_.load(std::memory_order_acquire)) {
    // [wake, listen, connections..., pidfds..., pending...]; a detached
    // lane polls fd -1 (ignored by poll).
    std::vector<pollfd> watch{{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (int fd : connections_) watch.push_back({fd, POLLRDHUP, 0});
    for (int fd : pidfds_) watch.push_back({fd, POLLIN, 0});
    pending_.watch(&watch);
    if (poll(watch.data(), watch.size(), pending_.next_timeout_ms(now_ns())) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "ringloader: node \"%s\": poll: %s\n", name_.c_str(),
                   std::strerror(errno));
      return;
    }
    if (watch[0].revents) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof(count));
      if (stopping_.load(std::memory_order_acquire)) return;
      collect_violations();
    }
    for (size_t lane = 0; lane < lanes; ++lane) {
      // The trainer process died (a fork child may still hold the socket),
      // or it closed the connection.
      const bool died = watch[2 + lanes + lane].revents != 0;
      const bool hung_up = (watch[2 + lane].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
      if ((died || hung_up) && connections_[lane] >= 0) detach(lane, "");
    }
    const std::vector<ArrivedRequest> arrived =
        pending_.advance(watch.data() + first_pending, now_ns());
    for (const ArrivedRequest& request : arrived) answer(request.socket, request.request);
    if (watch[1].revents & POLLIN) accept_trainers(now_ns());
  }
}

void AttachListener::collect_violations() {
  for (size_t lane = 0; lane < lanes_.size(); ++lane) {
    const std::string why = lanes_[lane]->take_violation();
    if (!why.empty() && connections_[lane] >= 0) detach(lane, why);
  }
}

void AttachListener::accept_trainers(int64_t now) {
  for (int accepted = 0; accepted < kAcceptsPerWake; ++accepted) {
    int socket = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (socket < 0) return;  // EAGAIN: none left
    // Who first: another user's process learns nothing, not even the lanes.
    PeerCredentials peer;
    const std::string refusal = admitted(socket, &peer);
    if (!refusal.empty()) {
      log_refusal(refusal, now);
      refuse(socket, -1, "not allowed to attach: " + refusal);
      continue;
    }
    ArrivedRequest arrived{};
    if (pending_.add(socket, peer.uid, now, &arrived)) answer(arrived.socket, arrived.request);
  }
}

void AttachListener::log_refusal(const std::string& why, int64_t now) {
  constexpr int64_t kLogIntervalNs = 1'000'000'000;
  if (last_refusal_log_ns_ != 0 && now - last_refusal_log_ns_ < kLogIntervalNs) {
    ++unlogged_refusals_;
    return;
  }
  const std::string more =
      unlogged_refusals_ > 0
          ? " (and " + std::to_string(unlogged_refusals_) + " more refused since the last line)"
          : std::string();
  std::fprintf(stderr, "ringloader: node \"%s\": refused a trainer: %s%s\n", name_.c_str(),
               why.c_str(), more.c_str());
  last_refusal_log_ns_ = now;
  unlogged_refusals_ = 0;
}

void AttachListener::refuse(int socket, int lane, const std::string& why) {
  AttachReply reply = reply_header(lane, 0);
  std::snprintf(reply.message, sizeof(reply.message), "%s", why.c_str());
  // The socket is non-blocking: a peer that does not read loses the reply.
  send_message(socket, &reply, sizeof(reply));
  close(socket);
}

std::string AttachListener::admitted(int socket, PeerCredentials* out) const {
  const PeerCredentials peer = peer_credentials(socket);
  *out = peer;
  if (peer.pid <= 0) return "its credentials are unknown (SO_PEERCRED)";
  if (peer.uid == policy_.uid) return "";
  if (policy_.group_allowed && peer_in_group(socket, policy_.group)) return "";
  return "pid " + std::to_string(peer.pid) + " runs as uid " + std::to_string(peer.uid) +
         ", the node as uid " + std::to_string(policy_.uid) +
         (policy_.group_allowed ? " and it is not in group " + std::to_string(policy_.group)
                                : " (NodeOptions::allow_group admits a group)");
}

void AttachListener::answer(int socket, const AttachRequest& request) {
  if (request.magic != kAttachMagic) {
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
  // retried) may be answered before run() polled its hang-up.
  if (connections_[lane] >= 0 && peer_gone(connections_[lane])) {
    detach(static_cast<size_t>(lane), "");
  }
  if (connections_[lane] >= 0) {
    const int holder = headers_[lane].trainer_pid.load(std::memory_order_acquire);
    refuse(socket, lane, "trainer " + std::to_string(lane) + " is attached by pid " +
                             std::to_string(holder) + "; each trainer needs its own lane "
                             "(LOCAL_RANK)");
    return;
  }
  const int pid = peer_pid(socket);
  int control_fd;
  try {
    control_fd = lanes_[lane]->attach();
  } catch (const std::exception& error) {
    refuse(socket, lane, error.what());
    return;
  }
  const AttachReply reply =
      accepted_reply(lane, handles_ ? handles_(static_cast<uint32_t>(lane)) : LaneHandle{});
  std::vector<int> fds{shared_fds_[0], control_fd};
  if (shared_fds_.size() > 1) fds.push_back(shared_fds_[1]);
  // Counted before the pid shows: whoever sees the pid in trainer_pids()
  // sees the attach in counts() too.
  count(+1, 0);
  headers_[lane].trainer_pid.store(pid, std::memory_order_release);
  connections_[lane] = socket;
  pidfds_[lane] = peer_pidfd(socket, pid);
  // A fresh connection's buffer takes one reply: this does not wait.
  if (!send_message(socket, &reply, sizeof(reply), fds)) {
    detach(static_cast<size_t>(lane), "");
    count(-1, -1);
  }
}

void AttachListener::count(int attaches, int detaches) {
  std::lock_guard<std::mutex> lock(mutex_);
  counts_.attaches += attaches;
  counts_.detaches += detaches;
}

void AttachListener::detach(size_t lane, const std::string& violation) {
  const int pid = headers_[lane].trainer_pid.load(std::memory_order_acquire);
  std::string why = violation;
  if (!why.empty()) {
    // Tell it why before it sees the connection close.
    AttachReply notice = reply_header(static_cast<int>(lane), 0);
    std::snprintf(notice.message, sizeof(notice.message),
                  "detached for a lane protocol violation: %s", why.c_str());
    send(connections_[lane], &notice, sizeof(notice), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  close(connections_[lane]);
  connections_[lane] = -1;
  if (pidfds_[lane] >= 0) close(pidfds_[lane]);
  pidfds_[lane] = -1;
  // The trainer is dead, or released everything before it closed; a fork
  // child of it may live on, but the node never reads that control again.
  int reclaimed = 0;
  if (why.empty() && !lanes_[lane]->detach(&reclaimed, &why)) {
    // Its last words were no honest trainer's: counted by the lane.
  }
  // Counted before the pid clears: whoever sees the lane free in
  // trainer_pids() sees its reclaimed slots in the counts too.
  count(0, 1);
  headers_[lane].trainer_pid.store(0, std::memory_order_release);
  if (!why.empty()) {
    std::fprintf(stderr,
                 "ringloader: node \"%s\": trainer %zu (pid %d) detached for a lane protocol "
                 "violation: %s; the lane drops its batches until a trainer attaches\n",
                 name_.c_str(), lane, pid, why.c_str());
  } else if (reclaimed > 0) {
    std::fprintf(stderr,
                 "ringloader: node \"%s\": trainer %zu (pid %d) left holding %d slot(s); "
                 "reclaimed (its batches are lost to that lane)\n",
                 name_.c_str(), lane, pid, reclaimed);
  }
}

}  // namespace ringloader::node
