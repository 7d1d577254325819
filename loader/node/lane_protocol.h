// SPDX-License-Identifier: BSD-3-Clause
// The fence protocol of one lane: a node fills its slots in lane-batch
// order, one trainer leases them in the same order and releases each when
// its last tensor dies. Lane batch n lives in slot n % S; the slot's state
// word carries n's generation, so a party waiting for batch n never mistakes
// batch n - S or n + S for it.
//
//   node:    FREE(n)  --write rows, targets, data; publish-->  READY(n)
//   trainer: READY(n) --next_lease = n + 1; lease-->          LEASED(n)
//   trainer: LEASED(n) --last tensor died: release-->          FREE(n + S)
//   attach:  LEASED(n), or READY(n) with n < next_lease (the trainer died
//            between its two stores)  --reclaim-->             FREE(n + S)
//
// Only the trainer attached to a lane leases and releases; the attach
// thread reclaims only after that trainer is gone, so the two never race on
// a slot. The node touches FREE slots only, the others never do.
#pragma once

#include <cstdint>

#include "loader/node/node_layout.h"
#include "loader/ring/futex.h"

namespace ringloader::node {

class LaneProtocol {
 public:
  LaneProtocol(LaneHeader& lane, LaneSlot* slots, uint32_t slot_count)
      : lane_(lane), slots_(slots), slot_count_(slot_count) {}

  LaneSlot& slot_for(uint64_t lane_batch) const {
    return slots_[lane_batch % slot_count_];
  }
  uint32_t slot_index(uint64_t lane_batch) const {
    return static_cast<uint32_t>(lane_batch % slot_count_);
  }
  LaneHeader& lane() const { return lane_; }
  uint32_t slot_count() const { return slot_count_; }

  // Node. Whether batch n's slot is FREE for it (its data may be written).
  bool free_for(uint64_t lane_batch) const;
  // Node. Whether slot `index` is FREE: its last batch was released or
  // reclaimed, so the memory that batch's data lives in may be reused.
  bool slot_free(uint32_t index) const;
  // Node. Waits up to `timeout_ns` for free_for(n); true when it is.
  bool wait_free(uint64_t lane_batch, int64_t timeout_ns) const;
  // Node. FREE(n) -> READY(n), after the slot's fields and data are written.
  void publish(uint64_t lane_batch, uint32_t rows, int64_t epoch,
               int64_t index) const;

  // Trainer. Whether batch n is READY.
  bool ready(uint64_t lane_batch) const;
  // Trainer. Waits up to `timeout_ns` for ready(n); true when it is.
  bool wait_ready(uint64_t lane_batch, int64_t timeout_ns) const;
  // Trainer. READY(n) -> LEASED(n), moving next_lease past n first.
  void lease(uint64_t lane_batch) const;
  // Trainer, any thread of its process. LEASED(n) -> FREE(n + S).
  void release(uint64_t lane_batch) const;

  // Attach thread, once the lane's trainer is gone: frees the slots it held
  // (see the diagram). Returns how many.
  int reclaim() const;

 private:
  LaneHeader& lane_;
  LaneSlot* slots_;
  uint32_t slot_count_;
};

}  // namespace ringloader::node
