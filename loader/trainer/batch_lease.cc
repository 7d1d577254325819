// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/batch_lease.h"

#include <torch/torch.h>

#include "loader/ring/slot_protocol.h"

namespace ringloader::trainer {
namespace {

class SlotLease {
 public:
  SlotLease(std::shared_ptr<ring::Ring> ring, std::shared_ptr<SlotReleaser> releaser,
            uint64_t batch_id)
      : ring_(std::move(ring)), releaser_(std::move(releaser)), batch_id_(batch_id) {}
  ~SlotLease() {
    // In a forked child the batch is a copy: the slot is the parent's to
    // hand back, and a fence would touch CUDA in the child.
    if (!ring_->owned_here()) return;
    releaser_->release(batch_id_);
  }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;

 private:
  std::shared_ptr<ring::Ring> ring_;  // mapped until the last lease ends
  std::shared_ptr<SlotReleaser> releaser_;
  uint64_t batch_id_;
};

std::vector<int64_t> batch_sizes(const SampleShape& shape, int64_t count) {
  if (shape.layout == Layout::kCHW) {
    return {count, shape.channels, shape.height, shape.width};
  }
  return {count, shape.height, shape.width, shape.channels};
}

}  // namespace

Batch lease_batch(const std::shared_ptr<ring::Ring>& ring,
                  const std::shared_ptr<SlotReleaser>& releaser,
                  uint64_t batch_id, const SampleShape& shape, uint32_t sample_count) {
  const uint32_t index = ring::slot_of(batch_id, ring->geometry().slot_count);
  if (sample_count > ring->geometry().batch_size) {
    throw Error("ringloader: internal error: lease of " + std::to_string(sample_count) +
                " samples in a slot of " + std::to_string(ring->geometry().batch_size));
  }
  const int64_t count = sample_count;
  auto lease = std::make_shared<SlotLease>(ring, releaser, batch_id);
  // The data tensor's deleter owns the lease; views share it.
  auto release = [lease](void*) {};
  auto dtype = shape.dtype == DType::kFloat32 ? torch::kFloat32 : torch::kUInt8;
  Batch batch;
  batch.data = torch::from_blob(ring->slot_data(index), batch_sizes(shape, count),
                                release, torch::TensorOptions().dtype(dtype));
  // Targets are copied (8 bytes a sample): code that keeps every label of an
  // epoch (metrics, confusion matrices) must not hold ring slots with them.
  batch.target = torch::from_blob(ring->slot_targets(index), {count},
                                  torch::TensorOptions().dtype(torch::kInt64))
                     .clone();
  return batch;
}

torch::Tensor rows_view(const torch::Tensor& bytes, ElementType type,
                        const std::vector<int64_t>& row_shape) {
  static const torch::ScalarType kTypes[] = {
      torch::kUInt8,   torch::kInt8,     torch::kInt16,   torch::kInt32,   torch::kInt64,
      torch::kFloat16, torch::kBFloat16, torch::kFloat32, torch::kFloat64, torch::kBool};
  const auto code = static_cast<size_t>(type);
  if (code >= sizeof(kTypes) / sizeof(kTypes[0])) {
    throw Error("ringloader: internal error: element type " + std::to_string(code));
  }
  const int64_t count = bytes.size(0);
  std::vector<int64_t> sizes{count};
  sizes.insert(sizes.end(), row_shape.begin(), row_shape.end());
  // A slot starts page-aligned and rows are whole elements, so every row
  // is aligned for its type.
  return bytes.view({count, bytes.size(2)}).view(kTypes[code]).view(sizes);
}

Batch lease_raw_batch(const std::shared_ptr<ring::Ring>& ring,
                      const std::shared_ptr<SlotReleaser>& releaser,
                      uint64_t batch_id) {
  const auto& geometry = ring->geometry();
  const uint32_t index = ring::slot_of(batch_id, geometry.slot_count);
  auto lease = std::make_shared<SlotLease>(ring, releaser, batch_id);
  Batch batch;
  batch.data = torch::from_blob(
      ring->slot_data(index),
      {static_cast<int64_t>(uint64_t{geometry.batch_size} * geometry.sample_bytes)},
      [lease](void*) {}, torch::TensorOptions().dtype(torch::kUInt8));
  batch.target = torch::empty({0}, torch::kInt64);
  return batch;
}

}  // namespace ringloader::trainer
