// SPDX-License-Identifier: BSD-3-Clause
// Where lane slots' data lives, on each side. Host lanes are the node
// ring's slots (loader/node/host_lanes.cc); CUDA lanes are device
// allocations shared by IPC handles (loader/cuda/ipc_lanes.cc, or the
// refusal in loader/cuda/no_cuda.cc). No CUDA types here, so the node and
// the attached loader compile without CUDA.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "loader/node/lane_protocol.h"
#include "loader/node/node_lane.h"
#include "loader/node/node_layout.h"
#include "ringloader/loader.h"

namespace ringloader::node {

// The node's side: puts host batches into lane slots.
class NodeLanes {
 public:
  virtual ~NodeLanes() = default;
  // Constructing thread, once, before the node accepts trainers (they read
  // what it writes at attach): allocates device memory, keeps its IPC
  // handles (for lane_handle()) and writes the lanes' PCI bus ids into the
  // region (CUDA only).
  virtual void open() = 0;
  // Serve thread. Puts `batch`'s data into lane `lane`'s slot `slot`, whose
  // last batch is consumed. True when the data is in place (publish it now);
  // false when a copy is queued: reap() reports when it is done.
  virtual bool fill(uint32_t lane, uint32_t slot, Batch batch) = 0;
  // Serve thread. Calls `copied(lane)` for each queued copy now done, in
  // fill order per lane, and drops host batches no longer needed: copied
  // (CUDA) or whose lane slot's batch is consumed (host).
  virtual void reap(const std::function<void(uint32_t lane)>& copied) = 0;
  // Batches still being copied.
  virtual size_t in_flight() const = 0;
  // Attach thread, after open(): the handle lane `lane`'s trainer alone
  // gets in its attach reply (CUDA: the lane memory's IPC handle).
  virtual LaneHandle lane_handle(uint32_t lane) const {
    (void)lane;
    return {};
  }
  // Before the destructor (CUDA): lanes whose trainer may still map the
  // lane's memory keep it (undefined behaviour to free it under them).
  virtual void retire(const std::vector<bool>& still_attached) { (void)still_attached; }
};

// The trainer's side: wraps a READY slot's data as a tensor.
class TrainerLanes {
 public:
  virtual ~TrainerLanes() = default;
  // Trainer thread, for a slot just leased: `data` of the batch, aliasing
  // the slot. `release` runs once when the last tensor aliasing it dies
  // (any thread); for CUDA lanes with the lane's device current, so a
  // release fence it records lands on that device's current stream.
  virtual torch::Tensor wrap(uint32_t slot, const std::vector<int64_t>& sizes,
                             torch::ScalarType dtype, std::function<void()> release) = 0;
  // Where a target tensor goes: kCPU or the lane's CUDA device.
  virtual torch::Device device() const = 0;
};

// Host lanes over the node's ring (`ring`, `ring_bytes`: its mapping on
// that side). The node keeps each published ring batch until its lane's
// NodeLane says the slot's batch is consumed; the trainer's caller keeps
// the ring mapping (and the TrainerLanes) alive while tensors alias it:
// `release` owns them. The trainer's `ring` is a private copy-on-write
// mapping (map_copy_on_write): its batches are writable, and a batch's
// private pages are dropped before its slot is handed back.
std::unique_ptr<NodeLanes> make_host_node_lanes(std::vector<NodeLane*> lanes,
                                                const uint8_t* ring, size_t ring_bytes);
std::unique_ptr<TrainerLanes> make_host_trainer_lanes(const TrainerLane& lane,
                                                      uint8_t* ring, size_t ring_bytes);
// What a trainer knows of its CUDA lane, all copied at attach: the node's
// header fields (checked), the PCI bus id from its LaneHeader, and the
// handle from its own attach reply. Nothing is read from the region after.
struct CudaLane {
  uint32_t lane = 0;
  uint32_t slots = 0;  // lane_slots, checked >= 1
  uint64_t slot_data_bytes = 0;
  char pci_bus_id[kPciBusIdBytes] = {};
  LaneHandle memory_handle{};
};

// CUDA IPC lanes (OptionError without CUDA or a GPU). Lanes' devices come
// from their LaneHeaders; unless `explicit_devices`, lane i takes GPU
// i % (visible GPUs). The node's host batches must be page-locked for the
// copies to be asynchronous. The trainer finds the lane's GPU by its PCI
// bus id (its CUDA_VISIBLE_DEVICES may number GPUs otherwise). The trainer
// maps the lane's device memory read-write (CUDA IPC has no read-only
// mapping): an in-place op on a batch writes the lane's slot, which only
// this trainer maps and the node's next copy into it overwrites whole.
// As above for the caller.
std::unique_ptr<NodeLanes> make_cuda_node_lanes(NodeHeader* header, bool explicit_devices);
std::unique_ptr<TrainerLanes> make_cuda_trainer_lanes(const CudaLane& lane);

}  // namespace ringloader::node
