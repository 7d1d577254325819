// SPDX-License-Identifier: BSD-3-Clause
// CUDA IPC lanes: each lane's slots are one device allocation on its GPU,
// exported by cudaIpcGetMemHandle; each slot has an interprocess event.
//
//   node, copy stream:     H2D(host batch -> slot s)  record copied(s)  READY
//   trainer, its stream:   wait copied(s)  ... kernels reading s ...
//   last tensor dies:      record a local event on the dropping thread's
//                          stream; FREE once it is done (SlotReleaser)
//
// The trainer's wait is GPU-side. Its release waits on its own side: an
// interprocess event whose last recorder was destroyed (a trainer that
// exited or died) may never complete, so the node never waits on an event
// a trainer recorded; by the time the node sees FREE, the trainer's reads
// of the slot are done.
#include <cuda_runtime_api.h>

#include <cstring>
#include <deque>
#include <vector>

#include <torch/torch.h>

#include "loader/cuda/cuda_check.h"
#include "loader/cuda/current_stream.h"
#include "loader/cuda/device_guard.h"
#include "loader/node/lane_memory.h"

namespace ringloader::node {
namespace {

using cuda::check;
using cuda::DeviceGuard;

LaneHeader* lane_headers(NodeHeader* header) {
  return reinterpret_cast<LaneHeader*>(reinterpret_cast<uint8_t*>(header) +
                                       sizeof(NodeHeader));
}

LaneSlot* lane_slots(NodeHeader* header, uint32_t lane) {
  auto* first = reinterpret_cast<LaneSlot*>(lane_headers(header) + header->lane_count);
  return first + uint64_t{lane} * header->lane_slots;
}

cudaEvent_t interprocess_event() {
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventInterprocess),
        "creating an interprocess event");
  return event;
}

class CudaNodeLanes : public NodeLanes {
 public:
  explicit CudaNodeLanes(NodeHeader* header) : header_(header) {}
  ~CudaNodeLanes() override;

  void open() override;
  void fill(uint32_t lane, uint32_t slot, Batch batch) override;
  void reap() override;
  size_t in_flight() const override { return copying_.size(); }

 private:
  struct Slot {
    cudaEvent_t copied = nullptr;  // exported: the trainer waits on it
  };
  struct Lane {
    int device = 0;
    uint8_t* memory = nullptr;
    cudaStream_t stream = nullptr;
    std::vector<Slot> slots;
  };
  struct Copy {
    cudaEvent_t done;  // local: when the host batch may go back to the ring
    int device;
    Batch host;
  };

  NodeHeader* header_;
  std::vector<Lane> lanes_;
  std::deque<Copy> copying_;
};

void CudaNodeLanes::open() {
  lanes_.resize(header_->lane_count);
  for (uint32_t i = 0; i < header_->lane_count; ++i) {
    Lane& lane = lanes_[i];
    LaneHeader& shared = lane_headers(header_)[i];
    lane.device = shared.device;
    DeviceGuard guard(lane.device);
    check(cudaMalloc(reinterpret_cast<void**>(&lane.memory),
                     header_->slot_data_bytes * header_->lane_slots),
          "allocating a lane's device slots");
    cudaIpcMemHandle_t memory;
    check(cudaIpcGetMemHandle(&memory, lane.memory), "exporting a lane's device slots");
    static_assert(sizeof(memory) == kIpcHandleBytes);
    std::memcpy(shared.memory_handle, &memory, sizeof(memory));
    check(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking),
          "creating a lane's copy stream");
    lane.slots.resize(header_->lane_slots);
    for (uint32_t s = 0; s < header_->lane_slots; ++s) {
      Slot& slot = lane.slots[s];
      slot.copied = interprocess_event();
      cudaIpcEventHandle_t handle;
      static_assert(sizeof(handle) == kIpcHandleBytes);
      check(cudaIpcGetEventHandle(&handle, slot.copied), "exporting a copied event");
      std::memcpy(lane_slots(header_, i)[s].copied_event, &handle, sizeof(handle));
    }
  }
}

void CudaNodeLanes::fill(uint32_t lane_index, uint32_t slot_index, Batch batch) {
  Lane& lane = lanes_.at(lane_index);
  Slot& slot = lane.slots.at(slot_index);
  DeviceGuard guard(lane.device);
  // The slot is FREE: the trainer's reads of it are done (see the top).
  torch::Tensor data = batch.data.contiguous();
  uint8_t* target = lane.memory + uint64_t{slot_index} * header_->slot_data_bytes;
  check(cudaMemcpyAsync(target, data.data_ptr(),
                        std::min<size_t>(data.nbytes(), header_->data_bytes),
                        cudaMemcpyHostToDevice, lane.stream),
        "copying a batch into a lane slot");
  check(cudaEventRecord(slot.copied, lane.stream), "recording a copied event");
  Copy copy{nullptr, lane.device, std::move(batch)};
  check(cudaEventCreateWithFlags(&copy.done, cudaEventDisableTiming), "creating an event");
  check(cudaEventRecord(copy.done, lane.stream), "recording a copy's end");
  copying_.push_back(std::move(copy));
}

void CudaNodeLanes::reap() {
  while (!copying_.empty()) {
    Copy& copy = copying_.front();
    DeviceGuard guard(copy.device);
    if (cudaEventQuery(copy.done) == cudaErrorNotReady) return;
    cudaEventDestroy(copy.done);
    copying_.pop_front();  // the host batch's slot goes back to the workers
  }
}

CudaNodeLanes::~CudaNodeLanes() {
  for (Copy& copy : copying_) {
    DeviceGuard guard(copy.device);
    cudaEventSynchronize(copy.done);
    cudaEventDestroy(copy.done);
  }
  copying_.clear();
  for (Lane& lane : lanes_) {
    DeviceGuard guard(lane.device);
    if (lane.stream) cudaStreamSynchronize(lane.stream);
    for (Slot& slot : lane.slots) cudaEventDestroy(slot.copied);
    if (lane.stream) cudaStreamDestroy(lane.stream);
    cudaFree(lane.memory);
  }
}

class CudaTrainerLanes : public TrainerLanes {
 public:
  CudaTrainerLanes(NodeHeader* header, uint32_t lane);
  ~CudaTrainerLanes() override;
  torch::Tensor wrap(uint32_t slot, const std::vector<int64_t>& sizes, torch::ScalarType dtype,
                     std::function<void()> release) override;
  torch::Device device() const override {
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_));
  }

 private:
  void open();  // at the first batch: CUDA is touched lazily
  NodeHeader* header_;
  uint32_t lane_;
  int device_;
  uint8_t* memory_ = nullptr;
  std::vector<cudaEvent_t> copied_;
};

CudaTrainerLanes::CudaTrainerLanes(NodeHeader* header, uint32_t lane)
    : header_(header), lane_(lane), device_(lane_headers(header)[lane].device) {
  if (!cuda::torch_has_cuda()) {
    throw OptionError("ringloader: node lanes are on GPU " + std::to_string(device_) +
                      ", but this trainer's libtorch has no CUDA");
  }
}

void CudaTrainerLanes::open() {
  DeviceGuard guard(device_);
  cudaIpcMemHandle_t memory;
  std::memcpy(&memory, lane_headers(header_)[lane_].memory_handle, sizeof(memory));
  check(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&memory_), memory,
                             cudaIpcMemLazyEnablePeerAccess),
        "opening the lane's device slots (CUDA IPC)");
  for (uint32_t s = 0; s < header_->lane_slots; ++s) {
    cudaIpcEventHandle_t handle;
    cudaEvent_t event;
    std::memcpy(&handle, lane_slots(header_, lane_)[s].copied_event, sizeof(handle));
    check(cudaIpcOpenEventHandle(&event, handle), "opening a copied event");
    copied_.push_back(event);
  }
}

torch::Tensor CudaTrainerLanes::wrap(uint32_t slot, const std::vector<int64_t>& sizes,
                                     torch::ScalarType dtype, std::function<void()> release) {
  if (!memory_) open();
  DeviceGuard guard(device_);
  // The batch is ordered before everything the trainer enqueues next on
  // its current stream, without a host wait.
  check(cudaStreamWaitEvent(cuda::current_stream(device_), copied_[slot], 0),
        "waiting for a lane slot's copy");
  const int index = device_;
  auto deleter = [index, release = std::move(release)](void*) {
    // The release fence is recorded on the lane's device, on the dropping
    // thread's current stream there (attached_loader.cc).
    DeviceGuard guard(index);
    release();
  };
  return torch::from_blob(memory_ + uint64_t{slot} * header_->slot_data_bytes, sizes, deleter,
                          torch::TensorOptions().dtype(dtype).device(device()));
}

CudaTrainerLanes::~CudaTrainerLanes() {
  if (!memory_) return;
  DeviceGuard guard(device_);
  for (cudaEvent_t event : copied_) cudaEventDestroy(event);
  cudaIpcCloseMemHandle(memory_);
}

}  // namespace

std::unique_ptr<NodeLanes> make_cuda_node_lanes(NodeHeader* header, bool explicit_devices) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw OptionError("ringloader: NodeOptions::device \"cuda\", but no GPU is visible");
  }
  for (uint32_t i = 0; i < header->lane_count; ++i) {
    LaneHeader& lane = lane_headers(header)[i];
    if (explicit_devices && (lane.device < 0 || lane.device >= count)) {
      throw OptionError("ringloader: NodeOptions::devices names GPU " +
                        std::to_string(lane.device) + " for trainer " + std::to_string(i) +
                        ", but " + std::to_string(count) + " GPU(s) are visible");
    }
    // With fewer GPUs than trainers, lanes share GPUs (several trainers per
    // GPU, e.g. tests).
    lane.device = lane.device % count;
  }
  return std::make_unique<CudaNodeLanes>(header);
}

std::unique_ptr<TrainerLanes> make_cuda_trainer_lanes(NodeHeader* header, uint32_t lane) {
  return std::make_unique<CudaTrainerLanes>(header, lane);
}

}  // namespace ringloader::node
