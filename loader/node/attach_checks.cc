// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/attach_checks.h"

#include <unistd.h>


#include "loader/node/node_socket.h"
#include "ringloader/errors.h"

namespace ringloader::node {
namespace {

// A batch's data beyond this (1 PiB) is no batch: the bound also keeps
// slot_data_bytes' rounding up far from 2^64.
constexpr uint64_t kMaxBatchBytes = uint64_t{1} << 50;

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

NodeFacts copy_node_header(const NodeHeader& mapped) {
  NodeFacts f;
  f.magic = read_once(mapped.magic);
  f.layout_version = read_once(mapped.layout_version);
  f.lane_count = read_once(mapped.lane_count);
  f.lane_slots = read_once(mapped.lane_slots);
  f.device = read_once(mapped.device);
  f.batch_size = read_once(mapped.batch_size);
  f.batches_per_epoch = read_once(mapped.batches_per_epoch);
  f.first_epoch = read_once(mapped.first_epoch);
  f.epochs = read_once(mapped.epochs);
  f.slot_data_bytes = read_once(mapped.slot_data_bytes);
  f.data_bytes = read_once(mapped.data_bytes);
  f.channels = read_once(mapped.channels);
  f.height = read_once(mapped.height);
  f.width = read_once(mapped.width);
  f.dtype = read_once(mapped.dtype);
  f.layout = read_once(mapped.layout);
  f.targets_offset = read_once(mapped.targets_offset);
  f.indices_offset = read_once(mapped.indices_offset);
  f.ring_bytes = read_once(mapped.ring_bytes);
  f.total_bytes = read_once(mapped.total_bytes);
  return f;
}

void check_node_facts(const NodeFacts& h, size_t region_bytes, size_t ring_bytes, int lane,
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
  // Each product checked: 53237 x 27211 x 759 x 16777215 wraps to 16 MB.
  uint64_t batch_bytes = h.dtype == 1 ? 4 : 1;
  const uint64_t factors[] = {uint64_t(h.channels), uint64_t(h.height), uint64_t(h.width),
                              uint64_t(h.batch_size)};
  for (uint64_t factor : factors) {
    if (__builtin_mul_overflow(batch_bytes, factor, &batch_bytes) || batch_bytes > kMaxBatchBytes) {
      bad(who, lane, "the batch's size (channels x height x width x batch_size x element)",
          "over " + std::to_string(kMaxBatchBytes) + " bytes", "a size that fits");
    }
  }
  equal<uint64_t>(who, lane, "data_bytes", h.data_bytes, batch_bytes);
  // Bounded above: lanes x slots x batch_size x 8 <= 2^10 x 2^6 x 2^24 x 8,
  // and the geometry's sums of such terms stay far below 2^64.
  const NodeGeometry geometry = h.geometry();
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

void check_slot(const LaneSlot& slot, uint64_t lane_batch, const NodeFacts& h, int lane,
                const std::string& who) {
  equal<uint64_t>(who, lane, "slot lane_batch", slot.lane_batch, lane_batch);
  in_range<int64_t>(who, lane, "slot rows", slot.rows, 1, h.batch_size);
  in_range<int64_t>(who, lane, "slot epoch", slot.epoch, h.first_epoch,
                    h.epochs == 0 ? int64_t{1} << 40 : h.first_epoch + h.epochs - 1);
  in_range<int64_t>(who, lane, "slot index", slot.index, 0, h.batches_per_epoch - 1);
}

}  // namespace ringloader::node
