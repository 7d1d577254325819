// SPDX-License-Identifier: BSD-3-Clause
// Host ring slots -> per-GPU device slots on a dedicated copy stream.
//
//   copy stream:     [wait consumed(d)] H2D(slot b -> device d) [finish] record copied(d)
//                    host func: release host slot b
//   consumer stream: wait copied(d) ... kernels reading d ... (lease ends) record consumed(d)
//
// No host synchronisation on the hot path: the trainer thread only enqueues.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <vector>

#include <torch/torch.h>

#include "loader/cuda/cuda_check.h"
#include "loader/cuda/device_guard.h"
#include "loader/cuda/current_stream.h"
#include "loader/cuda/finish_kernel.h"
#include "loader/trainer/device_stage.h"
#include "loader/trainer/release_fence.h"

namespace ringloader::trainer {
namespace {

using cuda::check;
using cuda::DeviceGuard;

// -1 for "cuda": the current device at the first iteration.
int parse_device(const std::string& device) {
  if (device == "cuda") return -1;
  if (device.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      int index = std::stoi(device.substr(5), &used);
      if (used == device.size() - 5 && index >= 0) return index;
    } catch (const std::exception&) {
    }
  }
  throw OptionError("ringloader: device '" + device +
                    "' is not \"cpu\", \"cuda\" or \"cuda:N\"");
}

struct DeviceSlot {
  uint8_t* raw = nullptr;      // the batch as workers wrote it
  float* finished = nullptr;   // float32 CHW, when finishing on device
  int64_t* targets = nullptr;
  cudaEvent_t copied = nullptr;
  cudaEvent_t consumed = nullptr;
  bool consumed_recorded = false;
  std::atomic<bool> leased{false};
};

// Owned jointly by the stage and every live device tensor, so device memory
// outlives the last tensor aliasing it.
struct DeviceSlots {
  int device = 0;
  cudaStream_t copy_stream = nullptr;
  std::vector<DeviceSlot> slots;

  explicit DeviceSlots(int count) : slots(count) {}
  ~DeviceSlots() {
    if (!copy_stream) return;  // never allocated: CUDA stays untouched
    DeviceGuard guard(device);
    if (copy_stream) cudaStreamSynchronize(copy_stream);
    for (DeviceSlot& slot : slots) {
      cudaFree(slot.raw);
      cudaFree(slot.finished);
      cudaFree(slot.targets);
      if (slot.copied) cudaEventDestroy(slot.copied);
      if (slot.consumed) cudaEventDestroy(slot.consumed);
    }
    if (copy_stream) cudaStreamDestroy(copy_stream);
  }
};

class DeviceLease {
 public:
  DeviceLease(std::shared_ptr<DeviceSlots> slots, int index)
      : slots_(std::move(slots)), index_(index) {}
  ~DeviceLease() {
    DeviceSlot& slot = slots_->slots[index_];
    DeviceGuard guard(slots_->device);
    // Work that used the tensors was enqueued on the current stream before
    // they died; the next copy into this slot waits for it.
    cudaEventRecord(slot.consumed, cuda::current_stream(slots_->device));
    slot.consumed_recorded = true;
    slot.leased.store(false, std::memory_order_release);
  }

 private:
  std::shared_ptr<DeviceSlots> slots_;
  int index_;
};

// A CUDA host function: the copy has read the slot, and CUDA calls are not
// allowed here, so the release is not fenced again.
void release_host_batch(void* batch) {
  trainer::UnfencedReleaseScope unfenced;
  delete static_cast<Batch*>(batch);
}

class CudaDeviceStage final : public DeviceStage {
 public:
  CudaDeviceStage(const LoaderOptions& options, const SampleShape& shape)
      : shape_(shape),
        batch_size_(options.batch_size),
        state_(std::make_shared<DeviceSlots>(options.device_slots)) {
    state_->device = parse_device(options.device);
    configure_finishing(options);
    check_device_exists();  // counts GPUs only: no context, no memory yet
  }

  int slot_count() const override { return static_cast<int>(state_->slots.size()); }
  bool can_accept() const override {
    const DeviceSlot& slot = state_->slots[next_slot_ % state_->slots.size()];
    return !slot.leased.load(std::memory_order_acquire);
  }
  int64_t batches() const override { return batches_; }

  Batch to_device(Batch host) override {
    if (!allocated_) allocate();  // the first iteration, on its thread
    const int index = static_cast<int>(next_slot_ % state_->slots.size());
    DeviceSlot& slot = state_->slots[index];
    if (slot.leased.load(std::memory_order_acquire)) {
      throw LeaseError("ringloader: all " + std::to_string(slot_count()) +
                       " device slots are held by live batches; drop earlier "
                       "batches (or clone them) or raise device_slots");
    }
    DeviceGuard guard(state_->device);
    cudaStream_t stream = state_->copy_stream;
    if (slot.consumed_recorded) {
      check(cudaStreamWaitEvent(stream, slot.consumed, 0), "waiting for consumer");
    }
    const int64_t count = host.data.size(0);
    check(cudaMemcpyAsync(slot.raw, host.data.data_ptr(), host.data.nbytes(),
                          cudaMemcpyHostToDevice, stream), "copying batch to GPU");
    check(cudaMemcpyAsync(slot.targets, host.target.data_ptr(),
                          host.target.nbytes(), cudaMemcpyHostToDevice, stream),
          "copying targets to GPU");
    if (finishing_) {
      cuda::FinishParams params = finish_;
      params.samples = count;
      cuda::launch_finish(slot.raw, slot.finished, params, stream);
      check(cudaGetLastError(), "launching the finishing kernel");
    }
    check(cudaEventRecord(slot.copied, stream), "recording copy event");
    Batch device = wrap(index, count, host);
    // The host slot goes back to the workers once the copy has read it.
    check(cudaLaunchHostFunc(stream, release_host_batch, new Batch(std::move(host))),
          "scheduling host slot release");
    check(cudaStreamWaitEvent(cuda::current_stream(state_->device), slot.copied, 0),
          "making the current stream wait for the copy");
    ++next_slot_;
    ++batches_;
    return device;
  }

 private:
  void configure_finishing(const LoaderOptions& options) {
    const auto& mean = options.device_normalize_mean;
    const auto& std = options.device_normalize_std;
    if (mean.empty() && std.empty()) return;
    if (shape_.dtype != DType::kUInt8) {
      throw OptionError("ringloader: device_normalize_* finishes uint8 batches; "
                        "this pipeline already ends in ToTensor");
    }
    if (static_cast<int>(mean.size()) != shape_.channels ||
        mean.size() != std.size() || shape_.channels > 4) {
      throw OptionError("ringloader: device_normalize_mean/std need one value "
                        "per channel (" + std::to_string(shape_.channels) + ")");
    }
    finishing_ = true;
    finish_.channels = shape_.channels;
    finish_.height = shape_.height;
    finish_.width = shape_.width;
    finish_.input_hwc = shape_.layout == Layout::kHWC;
    for (int c = 0; c < shape_.channels; ++c) {
      if (std[c] == 0) throw OptionError("ringloader: device_normalize_std has a 0");
      finish_.scale[c] = static_cast<float>(1.0 / (255.0 * std[c]));
      finish_.offset[c] = static_cast<float>(-mean[c] / std[c]);
    }
  }

  void check_device_exists() {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "counting GPUs");
    if (state_->device >= devices) {
      throw OptionError("ringloader: device cuda:" + std::to_string(state_->device) +
                        " requested but only " + std::to_string(devices) +
                        " GPU(s) are visible");
    }
  }

  void allocate() {
    if (state_->device < 0) check(cudaGetDevice(&state_->device), "current GPU");
    allocated_ = true;  // (DeviceSlots frees whatever part was made)
    DeviceGuard guard(state_->device);
    check(cudaStreamCreateWithFlags(&state_->copy_stream, cudaStreamNonBlocking),
          "creating copy stream");
    const size_t raw_bytes = batch_size_ * shape_.bytes();
    const size_t float_bytes = batch_size_ * static_cast<size_t>(shape_.channels) *
                               shape_.height * shape_.width * sizeof(float);
    for (DeviceSlot& slot : state_->slots) {
      check(cudaMalloc(reinterpret_cast<void**>(&slot.raw), raw_bytes), "allocating a device slot");
      if (finishing_) {
        check(cudaMalloc(reinterpret_cast<void**>(&slot.finished), float_bytes),
              "allocating a device slot");
      }
      check(cudaMalloc(reinterpret_cast<void**>(&slot.targets),
                       batch_size_ * sizeof(int64_t)), "allocating device targets");
      check(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming), "event");
      check(cudaEventCreateWithFlags(&slot.consumed, cudaEventDisableTiming), "event");
    }
  }

  Batch wrap(int index, int64_t count, const Batch& host) {
    DeviceSlot& slot = state_->slots[index];
    slot.leased.store(true, std::memory_order_release);
    auto lease = std::make_shared<DeviceLease>(state_, index);
    auto release = [lease](void*) {};
    auto on_device = torch::TensorOptions().device(torch::kCUDA, state_->device);
    Batch out;
    if (finishing_) {
      out.data = torch::from_blob(slot.finished,
                                  {count, shape_.channels, shape_.height, shape_.width},
                                  release, on_device.dtype(torch::kFloat32));
    } else {
      out.data = torch::from_blob(slot.raw, host.data.sizes(), release,
                                  on_device.dtype(host.data.dtype()));
    }
    out.target = torch::from_blob(slot.targets, {count}, release,
                                  on_device.dtype(torch::kInt64));
    out.epoch = host.epoch;
    out.index = host.index;
    out.sample_indices = host.sample_indices;
    return out;
  }

  SampleShape shape_;
  size_t batch_size_;
  std::shared_ptr<DeviceSlots> state_;
  bool finishing_ = false;
  cuda::FinishParams finish_;
  uint64_t next_slot_ = 0;
  int64_t batches_ = 0;
  bool allocated_ = false;
};

}  // namespace

std::string cuda_unavailable_reason() {
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess) {
    return std::string("no usable CUDA driver/GPU (") + cudaGetErrorString(status) + ")";
  }
  if (devices == 0) return "no GPU is visible";
  if (!cuda::torch_has_cuda()) return "this libtorch was built without CUDA";
  return "";
}

std::unique_ptr<DeviceStage> make_device_stage(const LoaderOptions& options,
                                               const SampleShape& shape) {
  parse_device(options.device);
  std::string reason = cuda_unavailable_reason();
  if (!reason.empty()) {
    throw OptionError("ringloader: device '" + options.device +
                      "' requested, but " + reason + "; use device = \"cpu\"");
  }
  if (options.device_slots < 2) {
    throw OptionError("ringloader: device_slots must be >= 2");
  }
  return std::make_unique<CudaDeviceStage>(options, shape);
}

bool pin_host_memory(void* data, size_t bytes) {
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    static std::once_flag once;
    std::call_once(once, [] {
      std::fprintf(stderr, "ringloader: no CUDA device; running host-only "
                           "(ring not pinned)\n");
    });
    cudaGetLastError();  // clear the sticky "no device" status
    return false;
  }
  status = cudaHostRegister(data, bytes, cudaHostRegisterPortable);
  if (status != cudaSuccess) {
    std::fprintf(stderr, "ringloader: cudaHostRegister of the ring failed (%s); "
                         "copies will be slower\n", cudaGetErrorString(status));
    cudaGetLastError();
    return false;
  }
  return true;
}

void unpin_host_memory(void* data) { cudaHostUnregister(data); }

}  // namespace ringloader::trainer
