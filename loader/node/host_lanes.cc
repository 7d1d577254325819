// SPDX-License-Identifier: BSD-3-Clause
// Host lanes: a batch stays in the node ring's slot its workers decoded it
// into. The node keeps the Batch (its ring lease) while the lane slot is
// READY or LEASED and publishes where the data is; the trainer maps the
// ring's memfd and wraps that page range. No copy on either side.
//
//   node:    ring batch -> held[lane][slot], LaneSlot::ring_offset -> READY
//   trainer: READY -> tensor over ring + ring_offset -> ... -> FREE
//   node:    slot's batch consumed (NodeLane::slot_released) -> drop held
//            batch -> its ring slot goes to the workers
//
// The trainer maps the ring private copy-on-write over a read-only
// descriptor: its batches are writable like a DataLoader's, its writes stay
// in its own pages (dropped when the batch is released, before the slot
// goes back), and the node's ring is never written. A hostile trainer can
// free only its own lane's slots early (its own batches then change under
// it).
#include <sys/mman.h>
#include <unistd.h>

#include <torch/torch.h>

#include "loader/node/lane_memory.h"
#include "loader/ring/ring_layout.h"
#include "ringloader/errors.h"

namespace ringloader::node {
namespace {

class HostNodeLanes : public NodeLanes {
 public:
  HostNodeLanes(std::vector<NodeLane*> lanes, const uint8_t* ring, size_t ring_bytes)
      : lanes_(std::move(lanes)), ring_(ring), ring_bytes_(ring_bytes) {
    for (const NodeLane* lane : lanes_) held_.emplace_back(lane->slot_count());
  }
  void open() override {}
  bool fill(uint32_t lane, uint32_t slot, Batch batch) override {
    const auto* data = static_cast<const uint8_t*>(batch.data.data_ptr());
    const auto bytes = static_cast<size_t>(batch.data.nbytes());
    // The node's Loader never spills (LoaderAccess::wait_for_held_slots), so
    // a host batch always aliases its ring slot.
    // Trainers drop a batch's private pages from its start (host_lanes
    // wrap): it must start on a ring slot's page.
    if (!batch.data.is_contiguous() || data < ring_ || data + bytes > ring_ + ring_bytes_ ||
        (data - ring_) % ring::kPageSize != 0) {
      throw Error("ringloader: node: a batch's data is not in the node's ring (internal error)");
    }
    lanes_[lane]->slot(slot).ring_offset = static_cast<uint64_t>(data - ring_);
    // The slot's last batch is consumed, so it is no one's any more.
    held_[lane][slot] = std::move(batch);
    return true;
  }
  void reap(const std::function<void(uint32_t)>&) override {
    for (size_t lane = 0; lane < lanes_.size(); ++lane) {
      for (uint32_t slot = 0; slot < held_[lane].size(); ++slot) {
        std::optional<Batch>& batch = held_[lane][slot];
        if (batch && lanes_[lane]->slot_released(slot)) batch.reset();
      }
    }
  }
  size_t in_flight() const override { return 0; }

 private:
  std::vector<NodeLane*> lanes_;
  const uint8_t* ring_;
  size_t ring_bytes_;
  // The ring batch each lane slot publishes, kept until the slot is FREE.
  std::vector<std::vector<std::optional<Batch>>> held_;
};

// The page size once for the process: the range a batch's release drops.
size_t system_page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

class HostTrainerLanes : public TrainerLanes {
 public:
  HostTrainerLanes(const TrainerLane& lane, uint8_t* ring, size_t ring_bytes)
      : lane_(lane), ring_(ring), ring_bytes_(ring_bytes) {}
  torch::Tensor wrap(uint32_t slot, const std::vector<int64_t>& sizes,
                     torch::ScalarType dtype, std::function<void()> release) override {
    // Read once: the node may be another build, and we check what we use.
    const uint64_t offset = read_once(lane_.slot_for(slot).ring_offset);
    // Each product checked: sizes that wrap could pass the bound below.
    uint64_t bytes = c10::elementSize(dtype);
    bool overflow = false;
    for (int64_t size : sizes) {
      overflow = overflow || size < 0 ||
                 __builtin_mul_overflow(bytes, static_cast<uint64_t>(size), &bytes);
    }
    if (overflow || offset > ring_bytes_ || bytes > ring_bytes_ - offset) {
      release();
      const std::string size =
          overflow ? std::string("a size over 64 bits") : std::to_string(bytes) + " bytes";
      throw NodeError("ringloader: node published a batch outside its ring (slot " +
                      std::to_string(slot) + ", ring_offset " + std::to_string(offset) + ", " +
                      size + ", ring " + std::to_string(ring_bytes_) + " bytes)");
    }
    const auto options = torch::TensorOptions().dtype(dtype);
    uint8_t* data = ring_ + offset;
    const size_t page = system_page_size();
    if (ring::kPageSize % page != 0 || offset % ring::kPageSize != 0) {
      // Pages here would be shared with other ring slots' data (pages
      // larger than the ring's alignment, or a node of another layout):
      // dropping them could lose another live batch's writes, keeping them
      // could show this slot's next batch stale bytes. A copy is safe.
      torch::Tensor copy = torch::from_blob(data, sizes, options).clone();
      release();
      return copy;
    }
    // A ring slot's data starts on a page and its stride is a page
    // multiple (ring_layout.h), and a host batch starts at its slot's
    // start: every page from `data` up to the batch's end rounded up holds
    // only this slot's bytes (its samples, then its targets and indices,
    // which trainers read from the node's region, not the ring).
    const size_t dropped = (bytes + page - 1) / page * page;
    // `release` owns the mappings: a batch may outlive its AttachedLoader.
    auto deleter = [data, dropped, release = std::move(release)](void*) {
      // Writes into the batch went to private copy-on-write pages. Drop
      // them before the slot goes back, while no batch of ours can be in
      // it: the slot's next batch must read the node's bytes, not ours.
      // Any thread may run this; madvise only fails on a bad range.
      (void)madvise(data, dropped, MADV_DONTNEED);
      release();
    };
    // Writable: an in-place op changes this process's private pages only;
    // the ring's descriptor is read-only, so the node's memory cannot be.
    return torch::from_blob(data, sizes, deleter, options);
  }
  torch::Device device() const override { return torch::kCPU; }

 private:
  TrainerLane lane_;
  uint8_t* ring_;
  size_t ring_bytes_;
};

}  // namespace

std::unique_ptr<NodeLanes> make_host_node_lanes(std::vector<NodeLane*> lanes,
                                                const uint8_t* ring, size_t ring_bytes) {
  return std::make_unique<HostNodeLanes>(std::move(lanes), ring, ring_bytes);
}

std::unique_ptr<TrainerLanes> make_host_trainer_lanes(const TrainerLane& lane,
                                                      uint8_t* ring, size_t ring_bytes) {
  return std::make_unique<HostTrainerLanes>(lane, ring, ring_bytes);
}

}  // namespace ringloader::node
