// SPDX-License-Identifier: BSD-3-Clause
// What a node loader and its trainers share. The node region: one memfd,
// written by the node only and sealed against every later writable mapping
// (F_SEAL_FUTURE_WRITE), sent to each trainer read-only over the attach
// socket (SCM_RIGHTS), laid out as
//
//   NodeHeader | LaneHeader[L] | LaneSlot[L * S] |
//   targets [L * S][batch_size] int64 | sample indices [L * S][batch_size] int64
//
// L lanes (one per trainer), S slots per lane. A slot's batch data is not
// in this region. With device "cpu" it stays where the node's workers
// decoded it, in a slot of the node's ring: the ring's memfd goes to the
// trainer with the region's, and LaneSlot::ring_offset says where the
// batch is (zero copies on either side). With device "cuda" a lane's slot
// data is one device allocation on the lane's GPU, exported by an IPC
// handle that only that lane's trainer receives, in its attach reply
// (node_socket.h): every trainer maps this region, so it holds no handle.
// The words a trainer writes (its slots' states, its next lease) are not
// here but in its lane's control memfd (lane_control.h), made afresh at
// each attach. Parties: the node's serve
// thread (fills slots), its attach thread (lanes' trainer_pid) and each
// lane's trainer process (reads its lane's slots). Standard layout,
// cache-line aligned, asserted: the trainer may be another build.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace ringloader::node {

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kPageSize = 4096;
inline constexpr uint64_t kNodeMagic = 0x45444f4e474e4952ULL;  // "RINGNODE"
inline constexpr uint32_t kNodeLayoutVersion = 5;
inline constexpr size_t kIpcHandleBytes = 64;  // cudaIpc{Mem,Event}Handle_t
inline constexpr size_t kNodeErrorBytes = 440;
inline constexpr size_t kPciBusIdBytes = 32;  // cudaDeviceGetPCIBusId's text
inline constexpr uint32_t kMaxLanes = 1024;
inline constexpr uint32_t kMaxLaneSlots = 64;

// A CUDA lane's cudaIpcMemHandle_t, as bytes: what opens that lane's
// device memory (read-write) in another process. Zeros for host lanes.
using LaneHandle = std::array<uint8_t, kIpcHandleBytes>;

enum class LaneDevice : uint32_t { kHost = 0, kCuda = 1 };
enum class NodeState : uint32_t { kServing = 0, kFinished = 1, kStopped = 2, kFailed = 3 };

// Written by the node before it binds its name; read-only after, but for
// `state` (the node's serve thread) and `error` (written before a kFailed
// state is stored with release). A trainer copies and checks the rest once
// at attach (attach_checks.h) and never reads it here again: the node's own
// mapping stays writable, so a field checked here could change after.
struct alignas(kCacheLine) NodeHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t lane_count;          // L
  uint32_t lane_slots;          // S
  uint32_t device;              // LaneDevice
  int64_t batch_size;
  int64_t batches_per_epoch;    // per lane
  int64_t first_epoch;
  int64_t epochs;               // 0: endless
  uint64_t slot_data_bytes;     // CUDA: stride of one slot's data (page multiple)
  uint64_t data_bytes;          // one batch's data: batch_size * sample bytes
  int32_t channels, height, width;
  uint32_t dtype;               // ringloader::DType
  uint32_t layout;              // ringloader::Layout
  int32_t node_pid;
  uint64_t targets_offset;      // from the region's start
  uint64_t indices_offset;
  uint64_t ring_bytes;          // host lanes: the node ring memfd's size; 0 for CUDA
  uint64_t total_bytes;
  // Futex word: NodeState. Trainers wait on their slots, not on this.
  std::atomic<uint32_t> state;
  uint32_t reserved;
  char error[kNodeErrorBytes];
};
static_assert(std::is_standard_layout_v<NodeHeader>);
static_assert(sizeof(NodeHeader) == 576 && alignof(NodeHeader) == 64);
static_assert(offsetof(NodeHeader, batch_size) == 24);
static_assert(offsetof(NodeHeader, channels) == 72);
static_assert(offsetof(NodeHeader, targets_offset) == 96);
static_assert(offsetof(NodeHeader, state) == 128);
static_assert(offsetof(NodeHeader, error) == 136);

// One trainer's lane. Written by the node only. No capability here (every
// trainer maps it): the lane memory's IPC handle goes to its trainer alone.
struct alignas(kCacheLine) LaneHeader {
  // The attached trainer's pid, 0 when none: written by the attach thread.
  std::atomic<int32_t> trainer_pid;
  int32_t device;               // the node's GPU index for LaneDevice::kCuda
  // The lane GPU's PCI bus id ("0000:3b:00.0"), NUL-terminated: a trainer
  // with another CUDA_VISIBLE_DEVICES numbers the GPUs differently.
  char pci_bus_id[kPciBusIdBytes];
  char padding[2 * kCacheLine - 8 - kPciBusIdBytes];
};
static_assert(std::is_standard_layout_v<LaneHeader>);
static_assert(sizeof(LaneHeader) == 128 && alignof(LaneHeader) == 64);
static_assert(offsetof(LaneHeader, pci_bus_id) == 8);

// Phases of a lane slot's state word: (generation << 2) | phase, where the
// generation is the lane batch number / S (mod 2^30), as in the ring.
enum LanePhase : uint32_t { kLaneFree = 0, kLaneReady = 1, kLaneLeased = 2 };
inline constexpr uint32_t kLanePhaseBits = 2;
inline constexpr uint32_t kLanePhaseMask = (1u << kLanePhaseBits) - 1;
inline constexpr uint32_t kLaneGenerationMask = (1u << 30) - 1;

// One slot of a lane. The node writes every field before it stores READY
// (release) into the slot's word in the lane's control memfd; the trainer
// reads them after it sees READY (acquire), and checks them: the node may
// be another build. With CUDA lanes READY is stored only once the node's
// copy into the slot completed (the node polls a local event), so a
// trainer never waits on the GPU for a node that may die mid-copy.
struct alignas(kCacheLine) LaneSlot {
  uint32_t rows;                // samples in the batch
  uint32_t reserved;
  uint64_t lane_batch;          // the lane's batch number it holds
  int64_t epoch;
  int64_t index;                // batch index within the epoch, per lane
  uint64_t ring_offset;         // host lanes: the batch data's offset in the ring memfd
  char padding[kCacheLine - 40];
};
static_assert(std::is_standard_layout_v<LaneSlot>);
static_assert(sizeof(LaneSlot) == 64 && alignof(LaneSlot) == 64);
static_assert(offsetof(LaneSlot, lane_batch) == 8);
static_assert(offsetof(LaneSlot, ring_offset) == 32);

// Sizes and offsets of a region for these parameters.
struct NodeGeometry {
  uint32_t lanes = 0;
  uint32_t slots = 0;
  int64_t batch_size = 0;
  uint64_t data_bytes = 0;
  bool host_lanes = true;  // LaneDevice::kHost

  uint64_t slot_data_bytes() const {
    return (data_bytes + kPageSize - 1) / kPageSize * kPageSize;
  }
  uint64_t lane_headers_offset() const { return sizeof(NodeHeader); }
  uint64_t slots_offset() const {
    return lane_headers_offset() + uint64_t{lanes} * sizeof(LaneHeader);
  }
  uint64_t targets_offset() const {
    return slots_offset() + uint64_t{lanes} * slots * sizeof(LaneSlot);
  }
  uint64_t indices_offset() const {
    return targets_offset() + uint64_t{lanes} * slots * batch_size * 8;
  }
  uint64_t total_bytes() const {
    return indices_offset() + uint64_t{lanes} * slots * batch_size * 8;
  }
};

inline uint32_t lane_state(uint64_t lane_batch, uint32_t slots, LanePhase phase) {
  uint32_t generation = static_cast<uint32_t>(lane_batch / slots) & kLaneGenerationMask;
  return (generation << kLanePhaseBits) | phase;
}

// A field of the node's region, read exactly once (a volatile load): the
// node's own mapping stays writable, so the compiler must not read the
// mapping again in place of the checked copy.
template <typename T>
T read_once(const T& mapped_field) {
  return *static_cast<const volatile T*>(&mapped_field);
}

}  // namespace ringloader::node
