// SPDX-License-Identifier: BSD-3-Clause
// A lane's control memfd: the only memory a trainer may write. The node
// makes a fresh one at each attach and sends it to that lane's trainer
// alone, so a trainer that was detached (or a fork child of it that kept
// the mapping) writes into memory the node never reads again. Laid out as
//
//   ControlHeader | ControlSlot[S]      (page-rounded)
//
// Everything in it is untrusted on the node's side: the node judges each
// word against its own record of what it published (lane_protocol.h) and
// detaches a trainer whose word no honest trainer could have written.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "loader/node/node_layout.h"

namespace ringloader::node {

inline constexpr uint64_t kControlMagic = 0x4c5254434e474e52ULL;  // "RNGNCTRL"

// Written by the node before it sends the memfd; then the trainer's.
struct alignas(kCacheLine) ControlHeader {
  uint64_t magic;
  uint32_t lane;
  uint32_t slots;               // S
  // The lane's next batch to lease: the trainer stores it before it leases
  // that batch; the node reads it once the trainer is gone.
  std::atomic<uint64_t> next_lease;
  char padding[kCacheLine - 24];
};
static_assert(std::is_standard_layout_v<ControlHeader>);
static_assert(sizeof(ControlHeader) == 64 && alignof(ControlHeader) == 64);
static_assert(offsetof(ControlHeader, next_lease) == 16);

// One slot's state word (a futex word: lane_state() of node_layout.h). The
// node stores READY; the trainer LEASED and FREE.
struct alignas(kCacheLine) ControlSlot {
  std::atomic<uint32_t> state;
  char padding[kCacheLine - 4];
};
static_assert(std::is_standard_layout_v<ControlSlot>);
static_assert(sizeof(ControlSlot) == 64 && alignof(ControlSlot) == 64);

inline uint64_t control_bytes(uint32_t slots) {
  const uint64_t bytes = sizeof(ControlHeader) + uint64_t{slots} * sizeof(ControlSlot);
  return (bytes + kPageSize - 1) / kPageSize * kPageSize;
}

inline ControlSlot* control_slots(ControlHeader* header) {
  return reinterpret_cast<ControlSlot*>(header + 1);
}

}  // namespace ringloader::node
