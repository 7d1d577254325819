// SPDX-License-Identifier: BSD-3-Clause
// Batches as tensors that alias a ring slot. The slot is leased to `data`:
// it returns to the workers when the last tensor aliasing data's storage
// (data or any view of it) is destroyed, from whatever thread, through the
// SlotReleaser (which may hold it back behind a release fence). `target` is
// a copy of the slot's labels and never holds the slot.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "loader/ring/ring.h"
#include "loader/trainer/slot_releaser.h"
#include "ringloader/dataset.h"
#include "ringloader/loader.h"

namespace ringloader::trainer {

// Wraps the READY slot of `batch_id` (already marked LEASED) as a Batch of
// `sample_count` samples: the caller's checked copy of the slot's count
// (ring/slot_validation.h), at most the ring's batch size, never the
// shared word itself, which a worker may rewrite at any time.
// Holds `ring` alive: tensors may outlive the Loader without dangling. Only
// `data`'s storage owns the lease (its deleter): swapping that storage's
// data pointer (a spill, held_batches.h) ends the lease.
Batch lease_batch(const std::shared_ptr<ring::Ring>& ring,
                  const std::shared_ptr<SlotReleaser>& releaser,
                  uint64_t batch_id, const SampleShape& shape, uint32_t sample_count);
// A tensor-rows batch (Dataset::tensor_rows) as its rows' type and shape:
// `bytes` (N, 1, row_bytes, 1) uint8, as lease_batch makes it, viewed as
// (N, *row_shape) of `type`. A view: it shares (and so holds) the lease.
torch::Tensor rows_view(const torch::Tensor& bytes, ElementType type,
                        const std::vector<int64_t>& row_shape);
// The same for external producers: `data` is the whole slot, flat uint8
// [batch_size * sample_bytes]; `target` is empty.
Batch lease_raw_batch(const std::shared_ptr<ring::Ring>& ring,
                      const std::shared_ptr<SlotReleaser>& releaser,
                      uint64_t batch_id);

}  // namespace ringloader::trainer
