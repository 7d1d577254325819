// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/pending_attaches.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace ringloader::node {

PendingAttaches::~PendingAttaches() {
  for (Pending& each : pending_) {
    close_all(&each.message.fds);
    close(each.socket);
  }
}

void PendingAttaches::drop(size_t index) {
  close_all(&pending_[index].message.fds);
  close(pending_[index].socket);
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(index));
  ++dropped_;
}

ReadStep PendingAttaches::step(int socket, PartialMessage* message, ArrivedRequest* arrived) {
  const ReadStep step = read_part(socket, message);
  // A request carries no descriptors: a peer that sends some is no trainer.
  if (step == ReadStep::kClosed || !message->fds.empty()) {
    close_all(&message->fds);
    close(socket);
    return ReadStep::kClosed;
  }
  if (step == ReadStep::kDone) {
    arrived->socket = socket;
    std::memcpy(&arrived->request, message->data.data(), sizeof(arrived->request));
  }
  return step;
}

bool PendingAttaches::add(int socket, uid_t uid, int64_t now_ns, ArrivedRequest* arrived) {
  Pending entry{socket, uid, now_ns + limits_.timeout_ns};
  const ReadStep first = step(socket, &entry.message, arrived);
  if (first == ReadStep::kDone) return true;
  if (first == ReadStep::kClosed) {
    ++dropped_;
    return false;
  }
  const auto same_uid = [uid](const Pending& each) { return each.uid == uid; };
  if (static_cast<size_t>(std::count_if(pending_.begin(), pending_.end(), same_uid)) >=
      limits_.per_uid) {
    drop(static_cast<size_t>(
        std::find_if(pending_.begin(), pending_.end(), same_uid) - pending_.begin()));
  }
  if (pending_.size() >= limits_.total) drop(0);
  pending_.push_back(std::move(entry));
  return false;
}

void PendingAttaches::watch(std::vector<pollfd>* out) const {
  for (const Pending& each : pending_) out->push_back({each.socket, POLLIN, 0});
}

std::vector<ArrivedRequest> PendingAttaches::advance(const pollfd* polled, int64_t now_ns) {
  std::vector<ArrivedRequest> arrived;
  std::vector<Pending> kept;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& each = pending_[i];
    ReadStep next = ReadStep::kMore;
    ArrivedRequest request{};
    if (polled[i].revents != 0) next = step(each.socket, &each.message, &request);
    if (next == ReadStep::kDone) {
      arrived.push_back(request);
    } else if (next == ReadStep::kClosed) {
      ++dropped_;
    } else if (now_ns >= each.deadline_ns) {
      close_all(&each.message.fds);
      close(each.socket);
      ++dropped_;
    } else {
      kept.push_back(std::move(each));
    }
  }
  pending_ = std::move(kept);
  return arrived;
}

int PendingAttaches::next_timeout_ms(int64_t now_ns) const {
  if (pending_.empty()) return -1;
  int64_t first = pending_.front().deadline_ns;
  for (const Pending& each : pending_) first = std::min(first, each.deadline_ns);
  const int64_t left_ms = (std::max<int64_t>(first - now_ns, 0) + 999'999) / 1'000'000;
  return static_cast<int>(std::min<int64_t>(left_ms, 60'000));
}

}  // namespace ringloader::node
