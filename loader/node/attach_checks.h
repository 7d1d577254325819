// SPDX-License-Identifier: BSD-3-Clause
// A trainer's checks of its node: the node's uid (the first process to bind
// a name is "the node", whoever it is), and every field of the memory it
// shares before the trainer uses it as a size, an offset or an index (the
// node may be another build, or not a ringloader node at all). Each failure
// throws NodeError naming the node, the lane and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "loader/node/lane_control.h"
#include "loader/node/node_layout.h"

namespace ringloader::node {

// The node process behind a connected `socket` runs as `node_uid` (-1:
// this process's effective uid). Returns its pid.
int check_node_peer(int socket, int64_t node_uid, const std::string& who);

// The node header's fields a trainer uses, copied once at attach: the
// node's own mapping of its region stays writable (F_SEAL_FUTURE_WRITE
// binds only later mappings), so a field checked in place could change
// after the check. Only `state` and `error` are read live, and neither is
// ever used as a size, an offset or an index.
struct NodeFacts {
  uint64_t magic = 0;
  uint32_t layout_version = 0, lane_count = 0, lane_slots = 0, device = 0;
  int64_t batch_size = 0, batches_per_epoch = 0, first_epoch = 0, epochs = 0;
  uint64_t slot_data_bytes = 0, data_bytes = 0;
  int32_t channels = 0, height = 0, width = 0;
  uint32_t dtype = 0, layout = 0;
  uint64_t targets_offset = 0, indices_offset = 0, ring_bytes = 0, total_bytes = 0;

  bool host_lanes() const { return device == static_cast<uint32_t>(LaneDevice::kHost); }
  NodeGeometry geometry() const {
    return {lane_count, lane_slots, batch_size, data_bytes, host_lanes()};
  }
};

// Each field read exactly once from the mapping (volatile loads: the
// compiler may not read the mapping again in place of the copy).
NodeFacts copy_node_header(const NodeHeader& mapped);

// The copy's fields: magic, version, lane < lane_count, lane_slots, shape,
// every product of sizes without overflow, offsets and sizes within
// `region_bytes`; host lanes' ring_bytes equal to `ring_bytes` (the ring
// mapping's size).
void check_node_facts(const NodeFacts& facts, size_t region_bytes, size_t ring_bytes, int lane,
                      const std::string& who);

// The lane's control memfd as the node made it for us.
void check_control(const ControlHeader& control, size_t bytes, int lane, uint32_t slots,
                   const std::string& who);

// A READY slot's fields, for lane batch `lane_batch`.
void check_slot(const LaneSlot& slot, uint64_t lane_batch, const NodeFacts& facts, int lane,
                const std::string& who);

}  // namespace ringloader::node
