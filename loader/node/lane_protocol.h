// SPDX-License-Identifier: BSD-3-Clause
// The fence protocol of one lane: a node fills its slots in lane-batch
// order, one trainer leases them in the same order and releases each when
// its last tensor dies. Lane batch n lives in slot n % S; the slot's state
// word (in the lane's control memfd, lane_control.h) carries n's
// generation, so a party waiting for batch n never mistakes batch n - S or
// n + S for it.
//
//   node:    FREE(n)  --write rows, targets, data; publish-->  READY(n)
//   trainer: READY(n) --next_lease = n + 1; lease-->          LEASED(n)
//   trainer: LEASED(n) --last tensor died: release-->          FREE(n + S)
//   node:    trainer gone: LEASED(n), or READY(n) with n < next_lease (it
//            died between its two stores) are reclaimed
//
// The trainer may write anything into its control words, so the node never
// trusts them: it knows which batch each slot holds, and judge_wait() and
// judge_reclaim() accept only the words an honest trainer can leave there.
// Anything else is a violation: the node detaches that trainer
// (node_lane.h). Pure functions: tests/fuzz/fuzz_lane_protocol.cc drives
// them with arbitrary words.
#pragma once

#include <cstdint>
#include <string>

#include "loader/node/lane_control.h"
#include "loader/node/node_layout.h"

namespace ringloader::node {

enum class SlotVerdict : uint8_t { kFree, kBusy, kViolation };

// The node wants lane batch `wanted`'s slot, whose last batch (wanted - S,
// when wanted >= S) was published: FREE(wanted) is free; READY or
// LEASED(wanted - S) is busy (the trainer has not released it yet);
// anything else is a violation.
SlotVerdict judge_wait(uint32_t word, uint64_t wanted, uint32_t slots);

// The node's record of a lane: batches below `filled` were put into slots
// (the slots hold [filled - S, filled)), those below `published` were
// stored READY, and the trainer attached when the lane's next batch to
// lease was `attached_cursor`.
struct LaneRecord {
  uint32_t slots = 0;
  uint64_t filled = 0;
  uint64_t published = 0;
  uint64_t attached_cursor = 0;
};

// The batch slot `slot` holds (the one of [filled - S, filled) in it);
// false when none was filled into it yet.
bool held_batch(const LaneRecord& record, uint32_t slot, uint64_t* held);

// Whether `word` says the trainer released batch `held`, the one its slot
// holds (published): FREE(held + S) released, READY/LEASED(held) not yet,
// anything else a violation.
SlotVerdict judge_released(uint32_t word, uint64_t held, uint32_t slots);

struct ReclaimPlan {
  bool violation = false;
  std::string why;       // the bad word, for the node's message
  uint64_t cursor = 0;   // the lane's next batch to lease from now on
  int reclaimed = 0;     // slots the trainer held
};
// The trainer attached under `record` is gone and left `next_lease` and
// `words[0..slots)`. Every batch below the returned cursor is consumed
// (its slot may be refilled), every one from it on is still READY.
ReclaimPlan judge_reclaim(const LaneRecord& record, uint64_t next_lease, const uint32_t* words);

// The word slot `slot` holds for a trainer that attaches under `record`
// with next lease `cursor` (cursor <= published): READY for a published
// batch not yet consumed, FREE for the next batch otherwise.
uint32_t initial_word(const LaneRecord& record, uint64_t cursor, uint32_t slot);

// The trainer's side of its lane: its control words (read-write) and its
// slots' fields in the node region (read-only).
class TrainerLane {
 public:
  TrainerLane(ControlHeader& control, const LaneSlot* slots, uint32_t slot_count)
      : control_(control), states_(control_slots(&control)), slots_(slots),
        slot_count_(slot_count) {}

  const LaneSlot& slot_for(uint64_t lane_batch) const {
    return slots_[lane_batch % slot_count_];
  }
  uint32_t slot_index(uint64_t lane_batch) const {
    return static_cast<uint32_t>(lane_batch % slot_count_);
  }
  uint32_t slot_count() const { return slot_count_; }
  uint64_t next_lease() const { return control_.next_lease.load(std::memory_order_acquire); }
  uint32_t state_of(uint64_t lane_batch) const {
    return states_[slot_index(lane_batch)].state.load(std::memory_order_acquire);
  }
  std::atomic<uint32_t>& word_of(uint32_t slot) const { return states_[slot].state; }

  // Whether batch n is READY.
  bool ready(uint64_t lane_batch) const;
  // Waits up to `timeout_ns` for ready(n); true when it is.
  bool wait_ready(uint64_t lane_batch, int64_t timeout_ns) const;
  // READY(n) -> LEASED(n), moving next_lease past n first.
  void lease(uint64_t lane_batch) const;
  // Any thread of the trainer's process. LEASED(n) -> FREE(n + S).
  void release(uint64_t lane_batch) const;

 private:
  ControlHeader& control_;
  ControlSlot* states_;
  const LaneSlot* slots_;
  uint32_t slot_count_;
};

}  // namespace ringloader::node
