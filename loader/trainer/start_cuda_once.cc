// SPDX-License-Identifier: BSD-3-Clause
// The Loader's lazy CUDA start: at the first iteration (never at
// construction), on the caller's current device, the ring is pinned and
// slot releases start waiting on fences.
#include "loader/trainer/loader_impl.h"
#include "loader/trainer/release_fence.h"

namespace ringloader {

void Loader::Impl::start_cuda_once() {
  if (cuda_started_) return;
  cuda_started_ = true;
  // Pinned even for device "cpu" when asked, like torch's pin_memory: the
  // caller may copy batches to a GPU itself (tensor.to(cuda,
  // non_blocking=true)), so from now on releases wait for that work.
  if (!options_.pin_memory && !device_) return;
  pin_.pin(ring_->data_area(), ring_->data_area_bytes());
  if (pin_.pinned()) releaser_->set_fences(trainer::make_cuda_fence_source());
}

}  // namespace ringloader
