// SPDX-License-Identifier: BSD-3-Clause
// Batches handed to the caller that still lease a ring slot, tracked weakly
// (the caller owns them) so that one can be spilled when the trainer needs
// its slot: its bytes move to private memory and its StorageImpl's data
// pointer is swapped, so every tensor and view sharing that storage follows.
// Trainer thread only.
#pragma once

#include <cstdint>
#include <vector>

#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/types.h>

namespace ringloader::trainer {

class HeldBatches {
 public:
  // `data` is the tensor whose storage's deleter owns batch_id's lease.
  void track(uint64_t batch_id, const torch::Tensor& data);
  // Spills batch_id if it is tracked and still alive: copies its slot bytes
  // into private memory and drops the storage's lease on the slot (which
  // releases it, maybe behind a fence). False when it is not tracked or
  // already dying (its release is on the way). When the copy cannot be
  // allocated, the allocator's exception propagates and nothing changed:
  // the batch stays tracked and leased, and a later call tries again.
  bool spill(uint64_t batch_id);
  int64_t spilled() const { return spilled_; }

 private:
  // A private copy of the storage's bytes (a CPU or device allocation).
  static c10::DataPtr copy_out(const c10::StorageImpl& storage);

  struct Held {
    uint64_t batch_id;
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  };
  std::vector<Held> held_;  // at most ring_slots live entries
  int64_t spilled_ = 0;
};

}  // namespace ringloader::trainer
