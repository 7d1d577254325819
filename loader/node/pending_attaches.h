// SPDX-License-Identifier: BSD-3-Clause
// Connections the node's attach thread accepted and admitted whose attach
// request has not fully arrived. None is ever waited on: each is read
// without blocking as its bytes come (partial reads kept), each has its own
// deadline, and the table is bounded per uid and in all, so a peer that
// connects and says nothing (or keeps reconnecting) delays no other
// trainer's attach, and never the thread's other work (detaching dead
// trainers, collecting violations). A uid over its bound loses its own
// oldest pending connection (the one silent the longest); a full table
// loses the oldest of all. Attach thread only.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "loader/node/node_socket.h"

namespace ringloader::node {

struct PendingLimits {
  size_t per_uid = 8;           // a hostile uid's silent sockets crowd out only its own
  size_t total = 64;
  int64_t timeout_ns = 2'000'000'000;  // an honest trainer sends its request at once
};

struct ArrivedRequest {
  int socket;  // owned by the caller from now on
  AttachRequest request;
};

class PendingAttaches {
 public:
  explicit PendingAttaches(PendingLimits limits) : limits_(limits) {}
  ~PendingAttaches();
  PendingAttaches(const PendingAttaches&) = delete;
  PendingAttaches& operator=(const PendingAttaches&) = delete;

  // Takes `socket` (non-blocking, admitted) of `uid`, accepted at `now_ns`,
  // and reads what already arrived: an honest trainer's request is there
  // before its connection is accepted, and is handed back at once (a flood
  // of its uid's connections cannot push it out of the table). Else it
  // waits in the table; false then.
  bool add(int socket, uid_t uid, int64_t now_ns, ArrivedRequest* arrived);
  // Appends a POLLIN entry per pending connection, in table order.
  void watch(std::vector<pollfd>* out) const;
  // `polled` are watch()'s entries after poll. Reads those that are
  // readable, closes those that closed, sent descriptors or a bad request,
  // or passed their deadline, and hands over the complete requests.
  std::vector<ArrivedRequest> advance(const pollfd* polled, int64_t now_ns);
  // Milliseconds until the next deadline (rounded up), -1 when none.
  int next_timeout_ms(int64_t now_ns) const;
  size_t size() const { return pending_.size(); }
  // Connections closed unanswered: silent past their deadline, or pushed
  // out by the bounds.
  int64_t dropped() const { return dropped_; }

 private:
  struct Pending {
    int socket;
    uid_t uid;
    int64_t deadline_ns;
    PartialMessage message{sizeof(AttachRequest)};
  };
  void drop(size_t index);
  // kDone: `arrived` filled; kClosed: the connection is closed; else more.
  static ReadStep step(int socket, PartialMessage* message, ArrivedRequest* arrived);

  PendingLimits limits_;
  std::vector<Pending> pending_;  // oldest first
  int64_t dropped_ = 0;
};

}  // namespace ringloader::node
