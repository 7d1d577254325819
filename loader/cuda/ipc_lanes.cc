// SPDX-License-Identifier: BSD-3-Clause
// CUDA IPC lanes: each lane's slots are one device allocation on its GPU,
// exported by cudaIpcGetMemHandle.
//
//   node, copy stream:     H2D(host batch -> slot s)  record done(s)
//   node, reap():          done(s) complete -> READY
//   trainer, its stream:   ... kernels reading s ...
//   last tensor dies:      record a local event on the dropping thread's
//                          stream; FREE once it is done (SlotReleaser)
//
// READY is stored only once the copy completed, so the trainer never waits
// on the GPU for the node: a node that dies mid-copy leaves a slot that is
// never READY, and the trainer's next() throws NodeError. The trainer's
// release waits on its own side too, so by the time the node sees FREE,
// the trainer's reads of the slot are done. A lane's GPU is named by its
// PCI bus id: a trainer's CUDA_VISIBLE_DEVICES may number GPUs otherwise.
// A lane's IPC handle opens its memory read-write in any process that has
// it, so it is no one's but its trainer's: lane_handle() puts it in that
// trainer's attach reply, never in the region every trainer maps.
#include <cuda_runtime_api.h>

#include <cstring>
#include <functional>
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

class CudaNodeLanes : public NodeLanes {
 public:
  // The sizes are the node's own, copied: the region they were written to
  // is shared memory, not where the node keeps what it relies on.
  explicit CudaNodeLanes(NodeHeader* header)
      : header_(header),
        lane_count_(header->lane_count),
        lane_slots_(header->lane_slots),
        slot_data_bytes_(header->slot_data_bytes),
        data_bytes_(header->data_bytes) {}
  ~CudaNodeLanes() override;

  void open() override;
  bool fill(uint32_t lane, uint32_t slot, Batch batch) override;
  void reap(const std::function<void(uint32_t)>& copied) override;
  size_t in_flight() const override { return copying_.size(); }
  LaneHandle lane_handle(uint32_t lane) const override { return lanes_.at(lane).handle; }
  void retire(const std::vector<bool>& still_attached) override { keep_ = still_attached; }

 private:
  struct Lane {
    int device = 0;
    uint8_t* memory = nullptr;
    cudaStream_t stream = nullptr;
    LaneHandle handle{};  // for this lane's trainer only
  };
  struct Copy {
    cudaEvent_t done;  // local: the slot may be READY, the host batch go back
    uint32_t lane;
    int device;
    Batch host;
  };

  NodeHeader* header_;  // where open() writes the lanes' PCI bus ids
  const uint32_t lane_count_, lane_slots_;
  const uint64_t slot_data_bytes_, data_bytes_;
  std::vector<Lane> lanes_;
  std::deque<Copy> copying_;
  std::vector<bool> keep_;  // lanes whose trainer may still map the memory
};

void CudaNodeLanes::open() {
  uint64_t lane_bytes = 0;
  if (__builtin_mul_overflow(slot_data_bytes_, uint64_t{lane_slots_}, &lane_bytes)) {
    throw Error("ringloader: node: a lane's device slots overflow 64 bits (internal error)");
  }
  lanes_.resize(lane_count_);
  for (uint32_t i = 0; i < lane_count_; ++i) {
    Lane& lane = lanes_[i];
    LaneHeader& shared = lane_headers(header_)[i];
    lane.device = shared.device;
    DeviceGuard guard(lane.device);
    check(cudaDeviceGetPCIBusId(shared.pci_bus_id, sizeof(shared.pci_bus_id), lane.device),
          "reading a lane GPU's PCI bus id");
    check(cudaMalloc(reinterpret_cast<void**>(&lane.memory), lane_bytes),
          "allocating a lane's device slots");
    cudaIpcMemHandle_t memory;
    check(cudaIpcGetMemHandle(&memory, lane.memory), "exporting a lane's device slots");
    static_assert(sizeof(memory) == kIpcHandleBytes);
    std::memcpy(lane.handle.data(), &memory, sizeof(memory));
    check(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking),
          "creating a lane's copy stream");
  }
}

bool CudaNodeLanes::fill(uint32_t lane_index, uint32_t slot_index, Batch batch) {
  Lane& lane = lanes_.at(lane_index);
  DeviceGuard guard(lane.device);
  // The slot's last batch is consumed: the trainer's reads of it are done.
  torch::Tensor data = batch.data.contiguous();
  uint8_t* target = lane.memory + uint64_t{slot_index % lane_slots_} * slot_data_bytes_;
  check(cudaMemcpyAsync(target, data.data_ptr(),
                        std::min<size_t>(data.nbytes(), data_bytes_),
                        cudaMemcpyHostToDevice, lane.stream),
        "copying a batch into a lane slot");
  Copy copy{nullptr, lane_index, lane.device, std::move(batch)};
  check(cudaEventCreateWithFlags(&copy.done, cudaEventDisableTiming), "creating an event");
  check(cudaEventRecord(copy.done, lane.stream), "recording a copy's end");
  copying_.push_back(std::move(copy));
  return false;  // READY once reap() sees the copy done
}

void CudaNodeLanes::reap(const std::function<void(uint32_t)>& copied) {
  // One lane's copies run on one stream, in fill order: the queue's order
  // is each lane's publish order.
  while (!copying_.empty()) {
    Copy& copy = copying_.front();
    DeviceGuard guard(copy.device);
    if (cudaEventQuery(copy.done) == cudaErrorNotReady) return;
    cudaEventDestroy(copy.done);
    const uint32_t lane = copy.lane;
    copying_.pop_front();  // the host batch's slot goes back to the workers
    copied(lane);
  }
}

CudaNodeLanes::~CudaNodeLanes() {
  for (Copy& copy : copying_) {
    DeviceGuard guard(copy.device);
    cudaEventSynchronize(copy.done);
    cudaEventDestroy(copy.done);
  }
  copying_.clear();
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane& lane = lanes_[i];
    DeviceGuard guard(lane.device);
    if (lane.stream) cudaStreamSynchronize(lane.stream);
    if (lane.stream) cudaStreamDestroy(lane.stream);
    // Freeing an allocation a live importer still maps is undefined: a
    // lane whose trainer did not detach in time keeps it until we exit.
    if (i < keep_.size() && keep_[i]) continue;
    cudaFree(lane.memory);
  }
}

class CudaTrainerLanes : public TrainerLanes {
 public:
  explicit CudaTrainerLanes(const CudaLane& lane);
  ~CudaTrainerLanes() override;
  torch::Tensor wrap(uint32_t slot, const std::vector<int64_t>& sizes, torch::ScalarType dtype,
                     std::function<void()> release) override;
  torch::Device device() const override {
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_));
  }

 private:
  void open();  // at the first batch
  const CudaLane lane_;  // copied at attach: nothing here is read from the node's region
  int device_ = 0;
  uint8_t* memory_ = nullptr;
};

CudaTrainerLanes::CudaTrainerLanes(const CudaLane& lane) : lane_(lane) {
  const char* bus_id = lane_.pci_bus_id;
  if (!memchr(bus_id, '\0', sizeof(lane_.pci_bus_id))) {
    throw NodeError("ringloader: node lane " + std::to_string(lane_.lane) +
                    "'s pci_bus_id is not a string (mixed ringloader versions)");
  }
  if (lane_.slots == 0) {  // checked at attach; a slot index divides by it
    throw NodeError("ringloader: node lane " + std::to_string(lane_.lane) + " has no slots");
  }
  if (!cuda::torch_has_cuda()) {
    throw OptionError("ringloader: node lanes are on GPU " + std::string(bus_id) +
                      ", but this trainer's libtorch has no CUDA");
  }
  // Our numbering of the lane's GPU (CUDA_VISIBLE_DEVICES may differ from
  // the node's).
  if (cudaDeviceGetByPCIBusId(&device_, bus_id) != cudaSuccess) {
    cudaGetLastError();
    throw NodeError("ringloader: node lane " + std::to_string(lane_.lane) + " is on GPU " +
                    std::string(bus_id) + ", which this trainer does not see "
                    "(CUDA_VISIBLE_DEVICES)");
  }
}

void CudaTrainerLanes::open() {
  DeviceGuard guard(device_);
  cudaIpcMemHandle_t memory;
  static_assert(sizeof(memory) == kIpcHandleBytes);
  std::memcpy(&memory, lane_.memory_handle.data(), sizeof(memory));
  check(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&memory_), memory,
                             cudaIpcMemLazyEnablePeerAccess),
        "opening the lane's device slots (CUDA IPC)");
}

torch::Tensor CudaTrainerLanes::wrap(uint32_t slot, const std::vector<int64_t>& sizes,
                                     torch::ScalarType dtype, std::function<void()> release) {
  if (!memory_) open();
  // The node stored READY after its copy completed: nothing to wait for.
  const int index = device_;
  auto deleter = [index, release = std::move(release)](void*) {
    // The release fence is recorded on the lane's device, on the dropping
    // thread's current stream (attached_loader.cc).
    DeviceGuard guard(index);
    release();
  };
  // Read-write (CUDA IPC maps no other way): an in-place op writes this
  // lane's slot on the GPU, which no other trainer maps; the node's next
  // copy into the slot overwrites it whole.
  return torch::from_blob(memory_ + uint64_t{slot % lane_.slots} * lane_.slot_data_bytes,
                          sizes, deleter,
                          torch::TensorOptions().dtype(dtype).device(device()));
}

CudaTrainerLanes::~CudaTrainerLanes() {
  if (!memory_) return;
  DeviceGuard guard(device_);
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

std::unique_ptr<TrainerLanes> make_cuda_trainer_lanes(const CudaLane& lane) {
  return std::make_unique<CudaTrainerLanes>(lane);
}

}  // namespace ringloader::node
