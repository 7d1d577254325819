// SPDX-License-Identifier: BSD-3-Clause
// Release fences as CUDA events on the releasing thread's current stream:
// everything that thread enqueued before the batch's last tensor died (a
// non_blocking copy out of the slot, kernels reading it) precedes the event.
#include <cuda_runtime_api.h>

#include <cstdio>

#include "loader/cuda/current_stream.h"
#include "loader/trainer/release_fence.h"

namespace ringloader::trainer {
namespace {

class DoneFence final : public ReleaseFence {
 public:
  bool done() override { return true; }
  void wait() override {}
};

class EventFence final : public ReleaseFence {
 public:
  explicit EventFence(cudaEvent_t event) : event_(event) {}
  ~EventFence() override { cudaEventDestroy(event_); }
  bool done() override {
    cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) return false;
    if (status != cudaSuccess) cudaGetLastError();  // a broken context: move on
    return true;
  }
  void wait() override {
    if (cudaEventSynchronize(event_) != cudaSuccess) cudaGetLastError();
  }

 private:
  cudaEvent_t event_;
};

class CudaFenceSource final : public FenceSource {
 public:
  std::unique_ptr<ReleaseFence> record() override {
    int device = 0;
    cudaEvent_t event = nullptr;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess) {
      if (cudaEventRecord(event, cuda::current_stream(device)) == cudaSuccess) {
        return std::make_unique<EventFence>(event);
      }
      cudaEventDestroy(event);
    }
    // No event: wait for all of this device's work here instead, so the
    // slot is never handed back under a copy still reading it.
    cudaGetLastError();
    cudaDeviceSynchronize();
    cudaGetLastError();
    return std::make_unique<DoneFence>();
  }
};

}  // namespace

std::unique_ptr<FenceSource> make_cuda_fence_source() {
  return std::make_unique<CudaFenceSource>();
}

}  // namespace ringloader::trainer
