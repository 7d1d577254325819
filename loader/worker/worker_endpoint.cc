// SPDX-License-Identifier: BSD-3-Clause
// WorkerEndpoint: the ring protocol for workers ringloader does not write
// itself (Python datasets). The same claim / acquire / publish steps as
// WorkerLoop and BatchFiller, handed out one batch at a time.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "loader/ring/fault_point.h"
#include "loader/ring/futex.h"
#include "loader/ring/ring.h"
#include "loader/ring/slot_validation.h"
#include "loader/ring/slot_protocol.h"
#include "loader/worker/claim_loop.h"
#include "ringloader/external.h"

namespace ringloader {

struct WorkerEndpoint::State {
  std::shared_ptr<ring::Ring> ring;
  std::unique_ptr<ring::SlotProtocol> protocol;
  ring::WorkerControl* control = nullptr;
  int worker_index = 0;
  int parent_pid = 0;
  ring::SlotProtocol::Deal deal;  // any batch, unless deal_round_robin

  bool keep_going() {
    control->heartbeat_ns.store(ring::monotonic_ns(), std::memory_order_relaxed);
    // A trainer that exec'd keeps its pid: its ring lock tells (ring.h).
    return getppid() == parent_pid && !ring->trainer_gone() &&
           ring->claims().shutdown.load(std::memory_order_acquire) == 0;
  }
};

WorkerEndpoint::WorkerEndpoint(int ring_fd, int worker_index, int parent_pid)
    : state_(std::make_unique<State>()) {
  if (getppid() != parent_pid) std::_Exit(1);
  state_->ring = ring::Ring::attach(ring_fd);
  state_->protocol = std::make_unique<ring::SlotProtocol>(*state_->ring);
  state_->control = &state_->ring->worker(static_cast<uint32_t>(worker_index));
  state_->worker_index = worker_index;
  state_->parent_pid = parent_pid;
  state_->control->pid.store(getpid(), std::memory_order_relaxed);
  // Heartbeat before ready (release), as in WorkerLoop::run: a zero
  // heartbeat behind ready reads as a hang to the trainer.
  state_->control->heartbeat_ns.store(ring::monotonic_ns(), std::memory_order_relaxed);
  state_->control->ready.store(1, std::memory_order_release);
  RINGLOADER_FAULT_POINT("endpoint.ready");
}

WorkerEndpoint::~WorkerEndpoint() = default;

void WorkerEndpoint::deal_round_robin(int worker_count) {
  if (worker_count < 1 || state_->worker_index < 0 ||
      state_->worker_index >= worker_count) {
    throw std::invalid_argument(
        "ringloader: worker " + std::to_string(state_->worker_index) +
        " cannot be dealt batches round-robin among " + std::to_string(worker_count) +
        " workers");
  }
  state_->deal.index = static_cast<uint32_t>(state_->worker_index);
  state_->deal.count = static_cast<uint32_t>(worker_count);
}

std::optional<WorkerEndpoint::Task> WorkerEndpoint::next_task() {
  std::optional<ring::Claim> claim = worker::claim_next_batch(
      *state_->ring, *state_->protocol, *state_->control,
      [this] { return state_->keep_going(); }, state_->deal);
  if (!claim) return std::nullopt;
  const auto& geometry = state_->ring->geometry();
  const uint64_t begin = claim->local_index * geometry.batch_size;
  const uint64_t end = std::min<uint64_t>(begin + geometry.batch_size, claim->sample_count);
  Task task;
  task.batch_id = claim->batch_id;
  task.epoch = static_cast<int64_t>(claim->epoch);
  task.index = static_cast<int64_t>(claim->local_index);
  for (uint64_t i = begin; i < end; ++i) {
    task.samples.push_back(state_->ring->order_entry(claim->order_table, i));
  }
  ring::SlotControl& slot = state_->ring->slot_for_batch(task.batch_id);
  slot.filler.store(state_->worker_index, std::memory_order_relaxed);
  slot.batch_id.store(task.batch_id, std::memory_order_relaxed);
  return task;
}

uint8_t* WorkerEndpoint::slot_data(const Task& task) const {
  return state_->ring->slot_data(
      ring::slot_of(task.batch_id, state_->ring->geometry().slot_count));
}

uint64_t WorkerEndpoint::slot_bytes() const {
  const auto& geometry = state_->ring->geometry();
  return uint64_t{geometry.batch_size} * geometry.sample_bytes;
}

void WorkerEndpoint::publish(const Task& task) {
  ring::SlotControl& slot = state_->ring->slot_for_batch(task.batch_id);
  std::copy(task.samples.begin(), task.samples.end(),
            state_->ring->slot_sample_indices(
                ring::slot_of(task.batch_id, state_->ring->geometry().slot_count)));
  state_->control->current_sample.store(-1, std::memory_order_relaxed);
  slot.sample_count = static_cast<uint32_t>(task.samples.size());
  slot.epoch = static_cast<uint64_t>(task.epoch);
  slot.error_kind = static_cast<uint32_t>(ring::ErrorKind::kNone);
  state_->control->batches.fetch_add(1, std::memory_order_relaxed);
  state_->control->samples.fetch_add(task.samples.size(), std::memory_order_relaxed);
  RINGLOADER_FAULT_POINT("endpoint.before_publish");
  state_->protocol->publish(task.batch_id, ring::kReady);
  // Only now: a worker killed before its publish must still name the batch,
  // or the trainer cannot tell it owned the FILLING slot (never re-done).
  state_->control->current_batch.store(ring::kNoBatch, std::memory_order_release);
}

void WorkerEndpoint::fail(const Task& task, int64_t sample, const std::string& message) {
  ring::SlotControl& slot = state_->ring->slot_for_batch(task.batch_id);
  slot.sample_count = 0;
  slot.error_kind = static_cast<uint32_t>(ring::ErrorKind::kOther);
  slot.error_sample = sample;
  const std::string text = ring::fit_error_text(message);
  std::memcpy(slot.error_text, text.c_str(), text.size() + 1);
  state_->protocol->publish(task.batch_id, ring::kFailed);
  state_->control->current_batch.store(ring::kNoBatch, std::memory_order_release);
}

void WorkerEndpoint::heartbeat(int64_t sample) {
  state_->control->heartbeat_ns.store(ring::monotonic_ns(), std::memory_order_relaxed);
  state_->control->current_sample.store(sample, std::memory_order_relaxed);
}

void WorkerEndpoint::add_times(double read_s, double transform_s) {
  state_->control->read_ns.fetch_add(static_cast<uint64_t>(read_s * 1e9),
                                     std::memory_order_relaxed);
  state_->control->transform_ns.fetch_add(static_cast<uint64_t>(transform_s * 1e9),
                                          std::memory_order_relaxed);
}

}  // namespace ringloader
