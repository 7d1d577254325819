// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/lane_protocol.h"

#include "loader/ring/futex.h"

namespace ringloader::node {
namespace {

std::string word_text(uint32_t word) {
  static const char* const kPhases[] = {"FREE", "READY", "LEASED", "phase 3"};
  return std::string(kPhases[word & kLanePhaseMask]) + " of generation " +
         std::to_string(word >> kLanePhaseBits);
}

}  // namespace

bool held_batch(const LaneRecord& record, uint32_t slot, uint64_t* held) {
  if (record.filled == 0) return false;
  const uint64_t last = record.filled - 1;
  const uint64_t back = (last % record.slots + record.slots - slot) % record.slots;
  if (back > last) return false;
  *held = last - back;
  return true;
}


SlotVerdict judge_wait(uint32_t word, uint64_t wanted, uint32_t slots) {
  if (word == lane_state(wanted, slots, kLaneFree)) return SlotVerdict::kFree;
  if (wanted >= slots && (word == lane_state(wanted - slots, slots, kLaneReady) ||
                          word == lane_state(wanted - slots, slots, kLaneLeased))) {
    return SlotVerdict::kBusy;
  }
  return SlotVerdict::kViolation;
}

SlotVerdict judge_released(uint32_t word, uint64_t held, uint32_t slots) {
  if (word == lane_state(held + slots, slots, kLaneFree)) return SlotVerdict::kFree;
  if (word == lane_state(held, slots, kLaneReady) ||
      word == lane_state(held, slots, kLaneLeased)) {
    return SlotVerdict::kBusy;
  }
  return SlotVerdict::kViolation;
}

ReclaimPlan judge_reclaim(const LaneRecord& record, uint64_t next_lease, const uint32_t* words) {
  ReclaimPlan plan;
  const uint32_t slots = record.slots;
  // next_lease only grows from where the trainer started, and never passes
  // what the node published.
  if (next_lease < record.attached_cursor || next_lease > record.published) {
    plan.violation = true;
    plan.why = "next_lease " + std::to_string(next_lease) + " outside [" +
               std::to_string(record.attached_cursor) + ", " +
               std::to_string(record.published) + "]";
    return plan;
  }
  plan.cursor = next_lease;
  for (uint32_t slot = 0; slot < slots; ++slot) {
    const uint32_t word = words[slot];
    uint64_t held = 0;
    bool ok;
    if (!held_batch(record, slot, &held)) {
      ok = word == lane_state(slot, slots, kLaneFree);  // never filled
    } else if (held >= record.published) {
      ok = word == lane_state(held, slots, kLaneFree);  // filled, not yet published
    } else if (word == lane_state(held, slots, kLaneReady)) {
      ok = true;
      if (held < next_lease) ++plan.reclaimed;  // died between its two stores
    } else if (word == lane_state(held, slots, kLaneLeased)) {
      ok = held < next_lease;  // lease() moves next_lease first
      plan.reclaimed += ok ? 1 : 0;
    } else {
      ok = word == lane_state(held + slots, slots, kLaneFree) && held < next_lease;
    }
    if (!ok) {
      plan.violation = true;
      plan.why = "slot " + std::to_string(slot) + " holds " + word_text(word) +
                 " (next_lease " + std::to_string(next_lease) + ")";
      return plan;
    }
  }
  return plan;
}

uint32_t initial_word(const LaneRecord& record, uint64_t cursor, uint32_t slot) {
  uint64_t held = 0;
  if (!held_batch(record, slot, &held)) return lane_state(slot, record.slots, kLaneFree);
  if (held >= record.published) return lane_state(held, record.slots, kLaneFree);
  if (held >= cursor) return lane_state(held, record.slots, kLaneReady);
  return lane_state(held + record.slots, record.slots, kLaneFree);
}

bool TrainerLane::ready(uint64_t lane_batch) const {
  return state_of(lane_batch) == lane_state(lane_batch, slot_count_, kLaneReady);
}

bool TrainerLane::wait_ready(uint64_t lane_batch, int64_t timeout_ns) const {
  std::atomic<uint32_t>& word = word_of(slot_index(lane_batch));
  const uint32_t wanted = lane_state(lane_batch, slot_count_, kLaneReady);
  // Acquire: the slot's fields, targets and data, published before READY.
  const uint32_t seen = word.load(std::memory_order_acquire);
  if (seen == wanted) return true;
  ring::futex_wait(word, seen, timeout_ns);
  return word.load(std::memory_order_acquire) == wanted;
}

void TrainerLane::lease(uint64_t lane_batch) const {
  // next_lease first: a trainer that dies between the two stores leaves a
  // READY slot below next_lease, which the node recognises as its own.
  control_.next_lease.store(lane_batch + 1, std::memory_order_release);
  word_of(slot_index(lane_batch))
      .store(lane_state(lane_batch, slot_count_, kLaneLeased), std::memory_order_release);
}

void TrainerLane::release(uint64_t lane_batch) const {
  std::atomic<uint32_t>& word = word_of(slot_index(lane_batch));
  // Release: every read of the slot (host) or the release event's wait
  // (device) precedes the node's acquire of FREE.
  word.store(lane_state(lane_batch + slot_count_, slot_count_, kLaneFree),
             std::memory_order_release);
  ring::futex_wake_all(word);
}

}  // namespace ringloader::node
