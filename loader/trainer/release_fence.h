// SPDX-License-Identifier: BSD-3-Clause
// Release fences: when a batch's last tensor dies, GPU work enqueued before
// that moment may still read its slot (tensor.to(cuda, non_blocking=true)
// from a pinned ring enqueues a copy and returns). A fence marks that work;
// the slot goes back to the workers only once the fence is done. No CUDA
// types here, so the deferral logic (slot_releaser.h) is tested on hosts
// with a test double.
#pragma once

#include <memory>

namespace ringloader::trainer {

class ReleaseFence {
 public:
  virtual ~ReleaseFence() = default;
  // Whether the fenced work is done; never blocks.
  virtual bool done() = 0;
  // Blocks until the fenced work is done.
  virtual void wait() = 0;
};

class FenceSource {
 public:
  virtual ~FenceSource() = default;
  // Fences the work enqueued so far by the calling thread (the one dropping
  // a batch's last tensor). Thread-safe; never throws (a source that cannot
  // fence waits for the work itself and returns a done fence).
  virtual std::unique_ptr<ReleaseFence> record() = 0;
};

// Events on the calling thread's current CUDA stream of its current device
// (loader/cuda/release_fence.cc); nullptr where CUDA is absent
// (loader/cuda/no_cuda.cc).
std::unique_ptr<FenceSource> make_cuda_fence_source();

// Releases made on this thread while a scope lives are not fenced: for CUDA
// host functions, which run after the GPU is done with the slot and must not
// call the CUDA API themselves.
class UnfencedReleaseScope {
 public:
  UnfencedReleaseScope();
  ~UnfencedReleaseScope();
  UnfencedReleaseScope(const UnfencedReleaseScope&) = delete;
  UnfencedReleaseScope& operator=(const UnfencedReleaseScope&) = delete;
  static bool active();

 private:
  bool previous_;
};

}  // namespace ringloader::trainer
