// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/lane_protocol.h"

namespace ringloader::node {
namespace {

// Waits up to `timeout_ns` for `state` to hold `wanted`.
bool wait_for(std::atomic<uint32_t>& state, uint32_t wanted, int64_t timeout_ns) {
  uint32_t seen = state.load(std::memory_order_acquire);
  if (seen == wanted) return true;
  ring::futex_wait(state, seen, timeout_ns);
  return state.load(std::memory_order_acquire) == wanted;
}

}  // namespace

bool LaneProtocol::free_for(uint64_t lane_batch) const {
  // Acquire: the trainer's reads of the slot (and, with CUDA, its release
  // event's record) happen before its release store.
  return slot_for(lane_batch).state.load(std::memory_order_acquire) ==
         lane_state(lane_batch, slot_count_, kLaneFree);
}

bool LaneProtocol::slot_free(uint32_t index) const {
  // Acquire: as free_for.
  return (slots_[index].state.load(std::memory_order_acquire) & kLanePhaseMask) == kLaneFree;
}

bool LaneProtocol::wait_free(uint64_t lane_batch, int64_t timeout_ns) const {
  return wait_for(slot_for(lane_batch).state, lane_state(lane_batch, slot_count_, kLaneFree),
                  timeout_ns);
}

void LaneProtocol::publish(uint64_t lane_batch, uint32_t rows, int64_t epoch,
                           int64_t index) const {
  LaneSlot& slot = slot_for(lane_batch);
  slot.rows = rows;
  slot.lane_batch = lane_batch;
  slot.epoch = epoch;
  slot.index = index;
  // Release: the fields above, the targets and the host data (or the CUDA
  // event record that covers device data) are visible to a trainer that
  // acquires READY.
  slot.state.store(lane_state(lane_batch, slot_count_, kLaneReady),
                   std::memory_order_release);
  ring::futex_wake_all(slot.state);
}

bool LaneProtocol::ready(uint64_t lane_batch) const {
  return slot_for(lane_batch).state.load(std::memory_order_acquire) ==
         lane_state(lane_batch, slot_count_, kLaneReady);
}

bool LaneProtocol::wait_ready(uint64_t lane_batch, int64_t timeout_ns) const {
  return wait_for(slot_for(lane_batch).state, lane_state(lane_batch, slot_count_, kLaneReady),
                  timeout_ns);
}

void LaneProtocol::lease(uint64_t lane_batch) const {
  // next_lease first: a trainer that dies between the two stores leaves a
  // READY slot below next_lease, which reclaim() recognises as its own.
  lane_.next_lease.store(lane_batch + 1, std::memory_order_release);
  slot_for(lane_batch).state.store(lane_state(lane_batch, slot_count_, kLaneLeased),
                                   std::memory_order_release);
}

void LaneProtocol::release(uint64_t lane_batch) const {
  auto& state = slot_for(lane_batch).state;
  // Release: every read of the slot (host) or the release event's record
  // (device) precedes the node's acquire of FREE.
  state.store(lane_state(lane_batch + slot_count_, slot_count_, kLaneFree),
              std::memory_order_release);
  ring::futex_wake_all(state);
}

int LaneProtocol::reclaim() const {
  // The trainer is gone, so next_lease and the leased states are final.
  const uint64_t next = lane_.next_lease.load(std::memory_order_acquire);
  int reclaimed = 0;
  for (uint32_t i = 0; i < slot_count_; ++i) {
    LaneSlot& slot = slots_[i];
    uint32_t state = slot.state.load(std::memory_order_acquire);
    const uint32_t phase = state & kLanePhaseMask;
    // READY's fields were published with the state; lane_batch is its own.
    const bool held = phase == kLaneLeased ||
                      (phase == kLaneReady && slot.lane_batch < next);
    if (!held) continue;
    uint32_t freed = lane_state(slot.lane_batch + slot_count_, slot_count_, kLaneFree);
    if (slot.state.compare_exchange_strong(state, freed, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
      ring::futex_wake_all(slot.state);
      ++reclaimed;
    }
  }
  return reclaimed;
}

}  // namespace ringloader::node
