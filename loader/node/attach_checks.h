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

// The region's header and geometry: magic, version, lane < lane_count,
// lane_slots, shape, offsets and sizes within `region_bytes`; host lanes'
// ring_bytes equal to `ring_bytes` (the ring mapping's size).
void check_node_header(const NodeHeader& header, size_t region_bytes, size_t ring_bytes,
                       int lane, const std::string& who);

// The lane's control memfd as the node made it for us.
void check_control(const ControlHeader& control, size_t bytes, int lane, uint32_t slots,
                   const std::string& who);

// A READY slot's fields, for lane batch `lane_batch`.
void check_slot(const LaneSlot& slot, uint64_t lane_batch, const NodeHeader& header, int lane,
                const std::string& who);

}  // namespace ringloader::node
