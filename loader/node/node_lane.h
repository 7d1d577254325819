// SPDX-License-Identifier: BSD-3-Clause
// The node's side of one lane: its own record of what it filled, published
// and what the trainer consumed, and the attached trainer's control memfd,
// whose words it judges (lane_protocol.h) and never uses as an index.
//
//   serve thread:  wait_free() -> fill the slot -> filled() -> published()
//   attach thread: attach() -> control fd to the trainer ... detach()
//
// A trainer's word that no honest trainer could write is a violation: the
// lane forgets that control at once (it is never read again), counts the
// violation and drops the lane's batches until a trainer attaches again, so
// a bad trainer never stalls the other lanes; the attach thread then closes
// its connection (take_violation()). A trainer that merely left or died is
// reclaimed instead: its held slots are freed, its lane keeps its READY
// batches for the next trainer, and an absent trainer's lane fills up and
// then waits (lockstep) as before.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "loader/node/lane_control.h"
#include "loader/node/lane_protocol.h"
#include "loader/node/node_layout.h"

namespace ringloader::node {

struct LaneCounts {
  int64_t reclaimed_slots = 0;
  int64_t violations = 0;
  int64_t dropped_batches = 0;
};

class NodeLane {
 public:
  // `slots` are the lane's slots in the node region (the node's memory).
  // `on_violation` runs (under no lock of the lane) when the serve thread
  // found one, to wake the attach thread.
  NodeLane(uint32_t lane, uint32_t slot_count, LaneSlot* slots,
           std::function<void()> on_violation);
  NodeLane(const NodeLane&) = delete;
  NodeLane& operator=(const NodeLane&) = delete;

  enum class Wait { kFill, kBusy, kDrop };
  // Serve thread. Waits up to `timeout_ns` for the slot of next_batch():
  // kFill (fill it, then filled()), kBusy (not yet; call again), or kDrop
  // (the lane drops batches after a violation: call dropped()).
  Wait wait_free(int64_t timeout_ns);
  uint64_t next_batch() const;
  uint32_t slot_count() const { return slot_count_; }
  LaneSlot& slot(uint32_t index) const { return slots_[index]; }
  // Serve thread: the slot of next_batch() holds its data (or a copy of it
  // is queued) and its fields are written.
  void filled();
  // Serve thread: the oldest filled batch's data is in place: READY.
  void published();
  // Serve thread: next_batch() is dropped (see kDrop).
  void dropped();
  // Serve thread: whether the batch in slot `index` is consumed (its data's
  // memory may be reused). Judges the trainer's word, like wait_free.
  bool slot_released(uint32_t index);
  // Any thread: wakes a trainer waiting on its words (the node stopped).
  void wake_trainer() const;

  // Attach thread: a trainer attaches; returns the fresh control memfd to
  // send it (the lane keeps it open). Ends a drop after a violation.
  int attach();
  // Attach thread: the trainer is gone (or was refused after attach()):
  // reclaims what it held. False, with `why`, when its words were a
  // violation (counted; the lane then drops batches until the next attach).
  bool detach(int* reclaimed, std::string* why);
  // Attach thread: a violation the serve thread found since the last call,
  // whose trainer is to be disconnected; empty when none.
  std::string take_violation();
  LaneCounts counts() const;

 private:
  struct Control;
  void violate(std::unique_lock<std::mutex>& lock, const std::string& why);
  LaneRecord record() const;

  const uint32_t lane_;
  const uint32_t slot_count_;
  LaneSlot* const slots_;
  const std::function<void()> on_violation_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // attach / detach, for an idle lane's wait
  std::shared_ptr<Control> control_;  // the attached trainer's; null when none
  uint64_t filled_ = 0;
  uint64_t published_ = 0;
  uint64_t cursor_ = 0;           // next batch to lease (when no trainer is attached)
  uint64_t attached_cursor_ = 0;  // cursor_ when the trainer attached
  bool dropping_ = false;
  std::string pending_violation_;
  LaneCounts counts_;
};

}  // namespace ringloader::node
