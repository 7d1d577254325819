// SPDX-License-Identifier: BSD-3-Clause
#include "loader/ring/ring.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <string>

#include "ringloader/errors.h"

namespace ringloader::ring {
namespace {

uint64_t round_up(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Byte 0 of the ring, locked by an open file description only the trainer
// has. The memfd is reopened through /proc, not dup'ed: workers share the
// ring fd's description (inherited), and a lock is per description. The
// descriptor is close-on-exec, so the lock ends when the trainer exits or
// execs (a fork child that lives on keeps it until it ends).
int hold_trainer_lock(int ring_fd) {
  std::string path = "/proc/self/fd/" + std::to_string(ring_fd);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct flock lock {};
  lock.l_type = F_RDLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 1;
  if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

uint64_t RingGeometry::targets_offset() const {
  return round_up(uint64_t{batch_size} * sample_bytes, kCacheLine);
}
uint64_t RingGeometry::indices_offset() const {
  return targets_offset() + uint64_t{batch_size} * sizeof(int64_t);
}
uint64_t RingGeometry::slot_data_bytes() const {
  return round_up(indices_offset() + uint64_t{batch_size} * sizeof(int64_t),
                  kPageSize);
}
uint64_t RingGeometry::redo_offset() const {
  return sizeof(RingHeader) + sizeof(ClaimControl) + kPlanCount * sizeof(Plan);
}
uint64_t RingGeometry::slot_controls_offset() const {
  return redo_offset() + sizeof(RedoQueue);
}
uint64_t RingGeometry::worker_controls_offset() const {
  return slot_controls_offset() + uint64_t{slot_count} * sizeof(SlotControl);
}
uint64_t RingGeometry::order_tables_offset() const {
  return worker_controls_offset() +
         uint64_t{worker_capacity} * sizeof(WorkerControl);
}
uint64_t RingGeometry::slot_data_offset() const {
  return round_up(order_tables_offset() + 2 * order_capacity * sizeof(int64_t),
                  kPageSize);
}
uint64_t RingGeometry::total_bytes() const {
  return slot_data_offset() + uint64_t{slot_count} * slot_data_bytes();
}

Ring::Ring(SharedRegion region, const RingGeometry& geometry)
    : region_(std::move(region)), geometry_(geometry) {}

Ring::~Ring() {
  if (lock_fd_ >= 0) close(lock_fd_);
}

bool Ring::owned_here() const { return maker_.here(); }

void Ring::require_owner(const char* action) const {
  if (owned_here()) return;
  throw Error("ringloader: cannot " + std::string(action) + " in process " +
              std::to_string(getpid()) + ": this Loader belongs to process " +
              std::to_string(maker_.pid()) +
              " (a fork copies it but shares its ring and workers); create a "
              "new Loader in the child instead");
}

bool Ring::trainer_gone() const {
  if (header().trainer_lock == 0) return false;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 0;
  probe.l_len = 1;
  if (fcntl(fd(), F_OFD_GETLK, &probe) != 0) return false;
  return probe.l_type == F_UNLCK;
}

std::shared_ptr<Ring> Ring::create(const RingGeometry& geometry) {
  if (geometry.slot_count == 0 || geometry.batch_size == 0 ||
      geometry.sample_bytes == 0) {
    throw OptionError("ringloader: ring needs slots, batch size and samples");
  }
  auto region = SharedRegion::create("ringloader-ring", geometry.total_bytes());
  auto ring = std::shared_ptr<Ring>(new Ring(std::move(region), geometry));
  // Fresh memfd pages are zero. Construct the atomics in place so their
  // lifetime starts here, then set what is not zero.
  uint8_t* base = ring->base();
  new (base) RingHeader{};
  new (base + sizeof(RingHeader)) ClaimControl{};
  for (uint32_t i = 0; i < kPlanCount; ++i) new (&ring->plan(i)) Plan{};
  new (&ring->redo()) RedoQueue{};
  for (auto& entry : ring->redo().batch) {
    entry.store(kNoBatch, std::memory_order_relaxed);
  }
  for (uint32_t i = 0; i < geometry.slot_count; ++i) {
    new (&ring->slot(i)) SlotControl{};
    ring->slot(i).filler.store(-1, std::memory_order_relaxed);
  }
  // Touch both order tables now: memory is fixed at construction, and an
  // epoch that first writes the second table must not grow the RSS.
  std::memset(static_cast<void*>(ring->order_table(0)), 0,
              2 * geometry.order_capacity * sizeof(int64_t));
  for (uint32_t i = 0; i < geometry.worker_capacity; ++i) {
    new (&ring->worker(i)) WorkerControl{};
    ring->worker(i).current_batch.store(kNoBatch, std::memory_order_relaxed);
    ring->worker(i).current_sample.store(-1, std::memory_order_relaxed);
  }
  RingHeader& header = ring->header();
  header.magic = kMagic;
  header.layout_version = kLayoutVersion;
  header.slot_count = geometry.slot_count;
  header.worker_capacity = geometry.worker_capacity;
  header.batch_size = geometry.batch_size;
  header.sample_bytes = geometry.sample_bytes;
  header.slot_data_bytes = geometry.slot_data_bytes();
  header.targets_offset = geometry.targets_offset();
  header.indices_offset = geometry.indices_offset();
  header.order_capacity = geometry.order_capacity;
  header.total_bytes = geometry.total_bytes();
  header.trainer_pid = getpid();
  ring->lock_fd_ = hold_trainer_lock(ring->fd());
  header.trainer_lock = ring->lock_fd_ >= 0 ? 1 : 0;
  // Workers are spawned after this; posix_spawn is a full barrier, but the
  // fence documents that the header is published before any reader exists.
  std::atomic_thread_fence(std::memory_order_release);
  return ring;
}

std::shared_ptr<Ring> Ring::attach(int fd) {
  auto region = SharedRegion::attach(fd);
  if (region.size() < sizeof(RingHeader)) {
    throw Error("ringloader: ring memfd too small for its header");
  }
  const auto* header = static_cast<const RingHeader*>(region.data());
  if (header->magic != kMagic || header->layout_version != kLayoutVersion) {
    throw Error("ringloader: ring layout mismatch (worker built from another "
                "version of ringloader?)");
  }
  RingGeometry geometry;
  geometry.slot_count = header->slot_count;
  geometry.worker_capacity = header->worker_capacity;
  geometry.batch_size = header->batch_size;
  geometry.sample_bytes = header->sample_bytes;
  geometry.order_capacity = header->order_capacity;
  if (geometry.total_bytes() != region.size() ||
      geometry.total_bytes() != header->total_bytes) {
    throw Error("ringloader: ring size " + std::to_string(region.size()) +
                " does not match its header");
  }
  return std::shared_ptr<Ring>(new Ring(std::move(region), geometry));
}

RingHeader& Ring::header() const {
  return *reinterpret_cast<RingHeader*>(base());
}
ClaimControl& Ring::claims() const {
  return *reinterpret_cast<ClaimControl*>(base() + sizeof(RingHeader));
}
Plan& Ring::plan(uint64_t tag) const {
  auto* plans = reinterpret_cast<Plan*>(base() + sizeof(RingHeader) +
                                        sizeof(ClaimControl));
  return plans[tag % kPlanCount];
}
RedoQueue& Ring::redo() const {
  return *reinterpret_cast<RedoQueue*>(base() + geometry_.redo_offset());
}
SlotControl& Ring::slot(uint32_t index) const {
  return reinterpret_cast<SlotControl*>(
      base() + geometry_.slot_controls_offset())[index];
}
WorkerControl& Ring::worker(uint32_t index) const {
  return reinterpret_cast<WorkerControl*>(
      base() + geometry_.worker_controls_offset())[index];
}
std::atomic<int64_t>* Ring::order_table(uint64_t which) const {
  auto* tables = reinterpret_cast<std::atomic<int64_t>*>(
      base() + geometry_.order_tables_offset());
  return tables + (which % 2) * geometry_.order_capacity;
}
uint8_t* Ring::slot_data(uint32_t index) const {
  return base() + geometry_.slot_data_offset() +
         uint64_t{index} * geometry_.slot_data_bytes();
}
int64_t* Ring::slot_targets(uint32_t index) const {
  return reinterpret_cast<int64_t*>(slot_data(index) +
                                    geometry_.targets_offset());
}
int64_t* Ring::slot_sample_indices(uint32_t index) const {
  return reinterpret_cast<int64_t*>(slot_data(index) +
                                    geometry_.indices_offset());
}
uint8_t* Ring::data_area() const {
  return base() + geometry_.slot_data_offset();
}
size_t Ring::data_area_bytes() const {
  return uint64_t{geometry_.slot_count} * geometry_.slot_data_bytes();
}

}  // namespace ringloader::ring
