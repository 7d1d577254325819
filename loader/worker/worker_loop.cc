#include "loader/worker/worker_loop.h"

#include <unistd.h>

#include "loader/ring/futex.h"

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
  // PR_SET_PDEATHSIG kills us with the trainer; this check covers the window
  // before prctl ran and a trainer that only exec'd away.
  if (getppid() != parent_pid_) {
    parent_gone_ = true;
    return false;
  }
  return ring_->claims().shutdown.load(std::memory_order_acquire) == 0;
}

int WorkerLoop::run() {
  control_.pid.store(getpid(), std::memory_order_relaxed);
  control_.ready.store(1, std::memory_order_release);
  ring::ClaimControl& claims = ring_->claims();
  constexpr int64_t kRecheckNs = 100'000'000;
  while (keep_going()) {
    // Read the signal before trying to claim, so a plan published between
    // the failed claim and the wait still wakes us.
    uint32_t signal = claims.plan_signal.load(std::memory_order_acquire);
    ring::Claim claim;
    if (!protocol_.try_claim(claim)) {
      ring::futex_wait(claims.plan_signal, signal, kRecheckNs);
      continue;
    }
    if (protocol_.cancelled(claim.batch_id)) continue;
    control_.current_batch.store(claim.batch_id, std::memory_order_relaxed);
    uint64_t wait_start = ring::monotonic_ns();
    bool acquired = protocol_.acquire_for_fill(
        claim.batch_id, [this] { return keep_going(); });
    control_.slot_wait_ns.fetch_add(ring::monotonic_ns() - wait_start,
                                    std::memory_order_relaxed);
    if (acquired) filler_.fill(claim);
    control_.current_batch.store(ring::kNoBatch, std::memory_order_relaxed);
  }
  return parent_gone_ ? 1 : 0;
}

}  // namespace ringloader::worker
