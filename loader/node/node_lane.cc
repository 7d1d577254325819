// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/node_lane.h"

#include <sys/stat.h>

#include <chrono>
#include <thread>

#include "loader/ring/futex.h"
#include "loader/ring/shared_region.h"

namespace ringloader::node {

struct NodeLane::Control {
  ring::SharedRegion memory;
  ControlHeader* header() const { return static_cast<ControlHeader*>(memory.data()); }
  std::atomic<uint32_t>& word(uint32_t slot) const { return control_slots(header())[slot].state; }
};

NodeLane::NodeLane(uint32_t lane, uint32_t slot_count, LaneSlot* slots,
                   std::function<void()> on_violation)
    : lane_(lane), slot_count_(slot_count), slots_(slots),
      on_violation_(std::move(on_violation)) {}

LaneRecord NodeLane::record() const {
  return LaneRecord{slot_count_, filled_, published_, attached_cursor_};
}

uint64_t NodeLane::next_batch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return filled_;
}

void NodeLane::violate(std::unique_lock<std::mutex>&, const std::string& why) {
  // Never read that memory again; what the lane published is lost to it.
  control_.reset();
  dropping_ = true;
  cursor_ = published_;
  ++counts_.violations;
  pending_violation_ = why;
  changed_.notify_all();
  if (on_violation_) on_violation_();
}

NodeLane::Wait NodeLane::wait_free(int64_t timeout_ns) {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t wanted = filled_;
  // The slot's last batch is still being copied in (CUDA): the caller reaps.
  if (published_ < filled_ && (dropping_ || (wanted >= slot_count_ &&
                                             wanted - slot_count_ >= published_))) {
    lock.unlock();
    if (timeout_ns > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    return Wait::kBusy;
  }
  if (dropping_) return Wait::kDrop;
  if (!control_) {
    // No trainer: the lane holds its next S batches, then waits for one.
    if (wanted < cursor_ + slot_count_) return Wait::kFill;
    changed_.wait_for(lock, std::chrono::nanoseconds(timeout_ns));
    return Wait::kBusy;  // the caller asks again
  }
  for (int round = 0;; ++round) {
    std::atomic<uint32_t>& word = control_->word(static_cast<uint32_t>(wanted % slot_count_));
    // Acquire: the trainer's reads of the slot happen before its release.
    const uint32_t seen = word.load(std::memory_order_acquire);
    switch (judge_wait(seen, wanted, slot_count_)) {
      case SlotVerdict::kFree:
        return Wait::kFill;
      case SlotVerdict::kViolation:
        violate(lock, "slot " + std::to_string(wanted % slot_count_) + " word " +
                          std::to_string(seen) + " while the node waits for lane batch " +
                          std::to_string(wanted));
        // Drops follow the batches still being copied in, in order.
        return published_ < filled_ ? Wait::kBusy : Wait::kDrop;
      case SlotVerdict::kBusy:
        break;
    }
    if (round > 0) return Wait::kBusy;
    // The mapping stays alive while we sleep on it, even if the trainer
    // detaches meanwhile.
    std::shared_ptr<Control> keep = control_;
    lock.unlock();
    ring::futex_wait(word, seen, timeout_ns);
    lock.lock();
    if (control_ != keep || dropping_) return Wait::kBusy;
  }
}

void NodeLane::filled() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++filled_;
}

void NodeLane::published() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (published_ >= filled_) return;  // nothing filled waits for it
  const uint64_t batch = published_++;
  if (dropping_) {
    cursor_ = published_;  // nobody will lease it
    return;
  }
  if (!control_) return;
  std::atomic<uint32_t>& word = control_->word(static_cast<uint32_t>(batch % slot_count_));
  // Release: the slot's fields, targets and data (host) or the completed
  // copy (device) are visible to a trainer that acquires READY.
  word.store(lane_state(batch, slot_count_, kLaneReady), std::memory_order_release);
  ring::futex_wake_all(word);
}

void NodeLane::dropped() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!dropping_ || published_ < filled_) return;  // only after kDrop
  ++filled_;
  published_ = filled_;
  cursor_ = filled_;
  ++counts_.dropped_batches;
}

bool NodeLane::slot_released(uint32_t index) {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t held = 0;
  if (!held_batch(record(), index, &held)) return true;
  if (held >= published_) return false;
  if (control_) {
    const uint32_t word = control_->word(index).load(std::memory_order_acquire);
    switch (judge_released(word, held, slot_count_)) {
      case SlotVerdict::kFree:
        return true;
      case SlotVerdict::kBusy:
        return false;
      case SlotVerdict::kViolation:
        violate(lock, "slot " + std::to_string(index) + " word " + std::to_string(word) +
                          " while it holds lane batch " + std::to_string(held));
        break;
    }
  }
  return held < cursor_;
}

void NodeLane::wake_trainer() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!control_) return;
  for (uint32_t i = 0; i < slot_count_; ++i) ring::futex_wake_all(control_->word(i));
}

int NodeLane::attach() {
  auto control = std::make_shared<Control>();
  control->memory = ring::SharedRegion::create("ringloader-lane-" + std::to_string(lane_),
                                               control_bytes(slot_count_));
  // Only its owner may reopen it (/proc/<pid>/fd): not a widened group.
  fchmod(control->memory.fd(), 0600);
  std::lock_guard<std::mutex> lock(mutex_);
  ControlHeader* header = control->header();
  header->magic = kControlMagic;
  header->lane = lane_;
  header->slots = slot_count_;
  if (dropping_) cursor_ = published_;
  header->next_lease.store(cursor_, std::memory_order_relaxed);
  for (uint32_t i = 0; i < slot_count_; ++i) {
    control->word(i).store(initial_word(record(), cursor_, i), std::memory_order_relaxed);
  }
  dropping_ = false;
  attached_cursor_ = cursor_;
  // Release (the mutex, then the socket): the trainer sees these words.
  control_ = std::move(control);
  changed_.notify_all();
  return control_->memory.fd();
}

bool NodeLane::detach(int* reclaimed, std::string* why) {
  std::lock_guard<std::mutex> lock(mutex_);
  *reclaimed = 0;
  if (!control_) return true;  // a violation detached it already
  // One snapshot: a fork child of the trainer may still write.
  const uint64_t next_lease = control_->header()->next_lease.load(std::memory_order_acquire);
  uint32_t words[kMaxLaneSlots];
  for (uint32_t i = 0; i < slot_count_; ++i) {
    words[i] = control_->word(i).load(std::memory_order_acquire);
  }
  const ReclaimPlan plan = judge_reclaim(record(), next_lease, words);
  control_.reset();
  changed_.notify_all();
  if (plan.violation) {
    dropping_ = true;
    cursor_ = published_;
    ++counts_.violations;
    *why = plan.why;
    return false;
  }
  cursor_ = plan.cursor;
  *reclaimed = plan.reclaimed;
  counts_.reclaimed_slots += plan.reclaimed;
  return true;
}

std::string NodeLane::take_violation() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string why;
  std::swap(why, pending_violation_);
  return why;
}

LaneCounts NodeLane::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

}  // namespace ringloader::node
