// SPDX-License-Identifier: BSD-3-Clause
// Typed views into the shared region, and the geometry that places them.
// Both the trainer (which creates and initialises the ring) and workers
// (which attach to it) go through this class, never through raw offsets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "loader/ring/process_owned.h"
#include "loader/ring/ring_layout.h"
#include "loader/ring/shared_region.h"

namespace ringloader::ring {

struct RingGeometry {
  uint32_t slot_count = 0;
  uint32_t worker_capacity = 0;
  uint32_t batch_size = 0;
  uint64_t sample_bytes = 0;
  uint64_t order_capacity = 0;

  uint64_t targets_offset() const;   // within a slot's data
  uint64_t indices_offset() const;   // within a slot's data
  uint64_t slot_data_bytes() const;  // page multiple
  uint64_t redo_offset() const;
  uint64_t slot_controls_offset() const;
  uint64_t worker_controls_offset() const;
  uint64_t order_tables_offset() const;
  uint64_t slot_data_offset() const;  // page aligned
  uint64_t total_bytes() const;
};

class Ring {
 public:
  // Trainer: creates, zero-initialises and fills in the header.
  static std::shared_ptr<Ring> create(const RingGeometry& geometry);
  // Worker: maps an inherited fd and validates magic, version and sizes.
  static std::shared_ptr<Ring> attach(int fd);

  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  const RingGeometry& geometry() const { return geometry_; }
  // The process that created (trainer) or attached (worker) this mapping. A
  // trainer's fork child shares the memory but owns none of it: releases,
  // shutdown and recovery there must leave the shared state alone.
  int owner_pid() const { return maker_.pid(); }
  bool owned_here() const;
  // Throws Error naming `action` unless called by the owner process.
  void require_owner(const char* action) const;
  // Worker: true once the trainer that created the ring is gone, also when
  // it exec'd (same pid): its lock went with its close-on-exec descriptor.
  bool trainer_gone() const;
  int fd() const { return region_.fd(); }
  size_t bytes() const { return region_.size(); }
  // The mapping's first byte: offsets into the memfd count from here.
  const uint8_t* mapping() const { return base(); }

  RingHeader& header() const;
  ClaimControl& claims() const;
  Plan& plan(uint64_t tag) const;  // tag modulo kPlanCount
  RedoQueue& redo() const;
  SlotControl& slot(uint32_t index) const;
  // The slot batch `batch_id` lives in (batch_id % K).
  SlotControl& slot_for_batch(uint64_t batch_id) const {
    return slot(static_cast<uint32_t>(batch_id % geometry_.slot_count));
  }
  WorkerControl& worker(uint32_t index) const;
  std::atomic<int64_t>* order_table(uint64_t which) const;
  // Entry `sample` (plan-local) of order table `which`. A table is a window
  // the trainer refills as the epoch goes on (Loader::Impl::publish_more):
  // sample i lives at i % order_capacity, so any index a peer hands us
  // lands inside the table. Relaxed: the plan's release publishes entries.
  int64_t order_entry(uint64_t which, uint64_t sample) const {
    return order_table(which)[sample % geometry_.order_capacity].load(std::memory_order_relaxed);
  }
  // Trainer only.
  void set_order_entry(uint64_t which, uint64_t sample, int64_t value) const {
    order_table(which)[sample % geometry_.order_capacity].store(value, std::memory_order_relaxed);
  }
  uint8_t* slot_data(uint32_t index) const;
  int64_t* slot_targets(uint32_t index) const;
  // The dataset indices of the samples in the slot, in order.
  int64_t* slot_sample_indices(uint32_t index) const;
  // Whole slot data area (for pinning with cudaHostRegister).
  uint8_t* data_area() const;
  size_t data_area_bytes() const;

 private:
  Ring(SharedRegion region, const RingGeometry& geometry);
  uint8_t* base() const { return static_cast<uint8_t*>(region_.data()); }
  SharedRegion region_;
  RingGeometry geometry_;
  MakingProcess maker_;
  int lock_fd_ = -1;  // trainer: holds the liveness lock (see trainer_gone)
};

}  // namespace ringloader::ring
