// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/held_batches.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>

namespace ringloader::trainer {

void HeldBatches::track(uint64_t batch_id, const torch::Tensor& data) {
  // Dead batches released their slots already: forget them, so the list
  // stays as short as the set of live leases.
  held_.erase(std::remove_if(held_.begin(), held_.end(),
                             [](const Held& held) { return held.storage.expired(); }),
              held_.end());
  held_.push_back({batch_id, data.storage().getWeakStorageImpl()});
}

bool HeldBatches::spill(uint64_t batch_id) {
  auto it = std::find_if(held_.begin(), held_.end(),
                         [&](const Held& held) { return held.batch_id == batch_id; });
  if (it == held_.end()) return false;
  c10::intrusive_ptr<c10::StorageImpl> storage = it->storage.lock();
  if (!storage) {
    held_.erase(it);  // dying: its own release frees the slot
    return false;
  }
  // Allocating (the step that can fail) comes before the batch leaves the
  // list: a failed spill leaves it tracked and leased, so the next next()
  // tries again instead of finding the slot held by a batch it forgot.
  at::DataPtr copy = copy_out(*storage);
  held_.erase(it);
  // The old DataPtr's deleter owns the slot lease: destroying it here, on
  // the trainer thread, releases the slot.
  at::DataPtr slot = storage->set_data_ptr(std::move(copy));
  ++spilled_;
  slot.clear();
  return true;
}

c10::DataPtr HeldBatches::copy_out(const c10::StorageImpl& storage) {
  const size_t bytes = storage.nbytes();
  const c10::Device device = storage.device();
  // A device batch is copied on its own device (the caller's current one
  // may be another GPU).
  c10::OptionalDeviceGuard on_device;
  if (!device.is_cpu()) on_device.reset_device(device);
  at::DataPtr copy = device.is_cpu() ? c10::GetCPUAllocator()->allocate(bytes)
                                     : c10::GetAllocator(device.type())->allocate(bytes);
  if (bytes > 0 && device.is_cpu()) {
    std::memcpy(copy.get(), storage.data_ptr().get(), bytes);
  } else if (bytes > 0) {
    // A device batch (a node's CUDA lane): the copy is enqueued on the
    // current stream, and the release that follows records its fence
    // there too, so the slot is not overwritten before the copy ran.
    auto options = torch::TensorOptions().dtype(torch::kUInt8).device(device);
    auto n = static_cast<int64_t>(bytes);
    torch::from_blob(copy.get(), {n}, options)
        .copy_(torch::from_blob(storage.data_ptr().get(), {n}, options), true);
  }
  return copy;
}

}  // namespace ringloader::trainer
