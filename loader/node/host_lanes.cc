// SPDX-License-Identifier: BSD-3-Clause
// Host lanes: slot data is the node region's own pages, so a trainer's
// tensor aliases the page the node wrote (one copy on the node, none on
// the trainer).
#include <cstring>

#include <torch/torch.h>

#include "loader/node/lane_memory.h"

namespace ringloader::node {
namespace {

uint8_t* slot_data(NodeHeader* header, uint32_t lane, uint32_t slot) {
  auto* base = reinterpret_cast<uint8_t*>(header);
  const uint64_t index = uint64_t{lane} * header->lane_slots + slot;
  return base + header->data_offset + index * header->slot_data_bytes;
}

class HostNodeLanes : public NodeLanes {
 public:
  explicit HostNodeLanes(NodeHeader* header) : header_(header) {}
  void open() override {}
  void fill(uint32_t lane, uint32_t slot, Batch batch) override {
    const torch::Tensor data = batch.data.contiguous();
    const size_t bytes = static_cast<size_t>(data.nbytes());
    std::memcpy(slot_data(header_, lane, slot), data.data_ptr(),
                std::min<size_t>(bytes, header_->data_bytes));
  }
  void reap() override {}
  size_t in_flight() const override { return 0; }

 private:
  NodeHeader* header_;
};

class HostTrainerLanes : public TrainerLanes {
 public:
  HostTrainerLanes(NodeHeader* header, uint32_t lane) : header_(header), lane_(lane) {}
  torch::Tensor wrap(uint32_t slot, const std::vector<int64_t>& sizes,
                     torch::ScalarType dtype, std::function<void()> release) override {
    // `release` owns the mapping: a batch may outlive its AttachedLoader.
    auto deleter = [release = std::move(release)](void*) { release(); };
    return torch::from_blob(slot_data(header_, lane_, slot), sizes, deleter,
                            torch::TensorOptions().dtype(dtype));
  }
  torch::Device device() const override { return torch::kCPU; }

 private:
  NodeHeader* header_;
  uint32_t lane_;
};

}  // namespace

std::unique_ptr<NodeLanes> make_host_node_lanes(NodeHeader* header) {
  return std::make_unique<HostNodeLanes>(header);
}

std::unique_ptr<TrainerLanes> make_host_trainer_lanes(NodeHeader* header, uint32_t lane) {
  return std::make_unique<HostTrainerLanes>(header, lane);
}

}  // namespace ringloader::node
