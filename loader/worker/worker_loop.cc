// SPDX-License-Identifier: BSD-3-Clause
#include "loader/worker/worker_loop.h"

#include <unistd.h>

#include "loader/ring/fault_point.h"
#include "loader/ring/futex.h"
#include "loader/worker/claim_loop.h"

namespace ringloader::worker {

WorkerLoop::WorkerLoop(std::shared_ptr<ring::Ring> ring,
                       const WorkerConfig& config, int worker_index,
                       int parent_pid)
    : ring_(std::move(ring)),
      protocol_(*ring_),
      control_(ring_->worker(static_cast<uint32_t>(worker_index))),
      filler_(config, *ring_, worker_index),
      parent_pid_(parent_pid) {}

void WorkerLoop::heartbeat() {
  control_.heartbeat_ns.store(ring::monotonic_ns(), std::memory_order_relaxed);
}

bool WorkerLoop::keep_going() {
  heartbeat();
  // PR_SET_PDEATHSIG kills us with the trainer; the parent check covers the
  // window before prctl ran. exec keeps the pid (and fires no PDEATHSIG):
  // the trainer's ring lock, held through a close-on-exec descriptor, tells.
  if (getppid() != parent_pid_ || ring_->trainer_gone()) {
    parent_gone_ = true;
    return false;
  }
  return ring_->claims().shutdown.load(std::memory_order_acquire) == 0;
}

int WorkerLoop::run() {
  control_.pid.store(getpid(), std::memory_order_relaxed);
  // The first heartbeat goes before `ready` (release): the trainer judges
  // hangs only once it sees ready, and a zero heartbeat would read as hours
  // without progress, so a worker descheduled here was killed as hung.
  heartbeat();
  control_.ready.store(1, std::memory_order_release);
  RINGLOADER_FAULT_POINT("worker.ready");
  auto keep_going = [this] { return this->keep_going(); };
  while (auto claim = claim_next_batch(*ring_, protocol_, control_, keep_going)) {
    filler_.fill(*claim);
    control_.current_batch.store(ring::kNoBatch, std::memory_order_release);
  }
  return parent_gone_ ? 1 : 0;
}

}  // namespace ringloader::worker
