// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/attach_checks.h"

#include <unistd.h>

#include "loader/node/node_socket.h"
#include "ringloader/errors.h"

namespace ringloader::node {
namespace {

[[noreturn]] void bad(const std::string& who, int lane, const std::string& field,
                      const std::string& value, const std::string& wanted) {
  throw NodeError("ringloader: " + who + " shares memory that fails a check (trainer " +
                  std::to_string(lane) + "): " + field + " is " + value + ", expected " +
                  wanted + " (mixed ringloader versions, or not a ringloader node)");
}

template <typename T>
void in_range(const std::string& who, int lane, const char* field, T value, T low, T high) {
  if (value < low || value > high) {
    bad(who, lane, field, std::to_string(value),
        std::to_string(low) + ".." + std::to_string(high));
  }
}

template <typename T>
void equal(const std::string& who, int lane, const char* field, T value, T wanted) {
  if (value != wanted) bad(who, lane, field, std::to_string(value), std::to_string(wanted));
}

}  // namespace

int check_node_peer(int socket, int64_t node_uid, const std::string& who) {
  const PeerCredentials peer = peer_credentials(socket);
  const int64_t wanted = node_uid >= 0 ? node_uid : static_cast<int64_t>(geteuid());
  if (peer.pid <= 0 || static_cast<int64_t>(peer.uid) != wanted) {
    throw NodeError("ringloader: " + who + " is served by pid " + std::to_string(peer.pid) +
                    " running as uid " + std::to_string(peer.uid) + ", not uid " +
                    std::to_string(wanted) + ": refused (another user's process took the "
                    "name? AttachOptions::node_uid names the node's uid)");
  }
  return peer.pid;
}

void check_node_header(const NodeHeader& h, size_t region_bytes, size_t ring_bytes, int lane,
                       const std::string& who) {
  if (region_bytes < sizeof(NodeHeader)) {
    bad(who, lane, "the region's size", std::to_string(region_bytes), "a NodeHeader at least");
  }
  equal(who, lane, "magic", h.magic, kNodeMagic);
  equal(who, lane, "layout_version", h.layout_version, kNodeLayoutVersion);
  in_range<uint32_t>(who, lane, "lane_count", h.lane_count, 1, kMaxLanes);
  in_range<int64_t>(who, lane, "trainer", lane, 0, int64_t{h.lane_count} - 1);
  in_range<uint32_t>(who, lane, "lane_slots", h.lane_slots, 1, kMaxLaneSlots);
  in_range<uint32_t>(who, lane, "device", h.device, 0, 1);
  in_range<int64_t>(who, lane, "batch_size", h.batch_size, 1, int64_t{1} << 24);
  in_range<int64_t>(who, lane, "batches_per_epoch", h.batches_per_epoch, 1, int64_t{1} << 40);
  in_range<int64_t>(who, lane, "first_epoch", h.first_epoch, 0, int64_t{1} << 40);
  in_range<int64_t>(who, lane, "epochs", h.epochs, 0, int64_t{1} << 40);
  in_range<int32_t>(who, lane, "channels", h.channels, 1, 1 << 16);
  in_range<int32_t>(who, lane, "height", h.height, 1, 1 << 16);
  in_range<int32_t>(who, lane, "width", h.width, 1, 1 << 16);
  in_range<uint32_t>(who, lane, "dtype", h.dtype, 0, 1);
  in_range<uint32_t>(who, lane, "layout", h.layout, 0, 1);
  const uint64_t sample = uint64_t(h.channels) * uint64_t(h.height) * uint64_t(h.width) *
                          (h.dtype == 1 ? 4 : 1);
  equal<uint64_t>(who, lane, "data_bytes", h.data_bytes, sample * uint64_t(h.batch_size));
  NodeGeometry geometry{h.lane_count, h.lane_slots, h.batch_size, h.data_bytes,
                        h.device == static_cast<uint32_t>(LaneDevice::kHost)};
  equal<uint64_t>(who, lane, "slot_data_bytes", h.slot_data_bytes, geometry.slot_data_bytes());
  equal<uint64_t>(who, lane, "targets_offset", h.targets_offset, geometry.targets_offset());
  equal<uint64_t>(who, lane, "indices_offset", h.indices_offset, geometry.indices_offset());
  equal<uint64_t>(who, lane, "total_bytes", h.total_bytes, geometry.total_bytes());
  equal<uint64_t>(who, lane, "the region's size", region_bytes, geometry.total_bytes());
  if (geometry.host_lanes) {
    equal<uint64_t>(who, lane, "ring_bytes", h.ring_bytes, ring_bytes);
    in_range<uint64_t>(who, lane, "data_bytes", h.data_bytes, 1, ring_bytes);
  }
}

void check_control(const ControlHeader& control, size_t bytes, int lane, uint32_t slots,
                   const std::string& who) {
  equal<uint64_t>(who, lane, "the control memfd's size", bytes, control_bytes(slots));
  equal(who, lane, "control magic", control.magic, kControlMagic);
  equal<int64_t>(who, lane, "control lane", control.lane, lane);
  equal(who, lane, "control slots", control.slots, slots);
}

void check_slot(const LaneSlot& slot, uint64_t lane_batch, const NodeHeader& h, int lane,
                const std::string& who) {
  equal<uint64_t>(who, lane, "slot lane_batch", slot.lane_batch, lane_batch);
  in_range<int64_t>(who, lane, "slot rows", slot.rows, 1, h.batch_size);
  in_range<int64_t>(who, lane, "slot epoch", slot.epoch, h.first_epoch,
                    h.epochs == 0 ? int64_t{1} << 40 : h.first_epoch + h.epochs - 1);
  in_range<int64_t>(who, lane, "slot index", slot.index, 0, h.batches_per_epoch - 1);
}

}  // namespace ringloader::node
