// SPDX-License-Identifier: BSD-3-Clause
// The claim half of a worker's life, shared by ringloader's own worker loop
// and WorkerEndpoint (external workers): wait for a plan, take a batch a dead
// worker left behind (redo queue) or claim the next one, skip it if
// cancelled, wait for its slot, and account the wait.
#pragma once

#include <optional>

#include "loader/ring/futex.h"
#include "loader/ring/ring.h"
#include "loader/ring/slot_protocol.h"

namespace ringloader::worker {

// Blocks until a live batch is claimed and its slot taken (FILLING), and
// returns it; the worker's current_batch names it. nullopt once
// keep_going() returns false (shutdown, trainer gone), or, before a claim
// only, once the worker is retired (WorkerControl::retire): a batch once
// claimed is always filled. With `deal`, only this worker's turns of the
// plan's batches (SlotProtocol::try_claim); a dead worker's batch is re-done
// by any worker.
template <typename KeepGoing>
std::optional<ring::Claim> claim_next_batch(const ring::Ring& ring,
                                            const ring::SlotProtocol& protocol,
                                            ring::WorkerControl& control,
                                            KeepGoing keep_going,
                                            ring::SlotProtocol::Deal deal = {}) {
  ring::ClaimControl& claims = ring.claims();
  constexpr int64_t kRecheckNs = 100'000'000;
  while (keep_going()) {
    // Acquire: pairs with the trainer's release store of the flag.
    if (control.retire.load(std::memory_order_acquire) != 0) return std::nullopt;
    // Read the signal before trying to claim, so a plan published between
    // the failed claim and the wait still wakes us.
    uint32_t signal = claims.plan_signal.load(std::memory_order_acquire);
    ring::Claim claim;
    // Re-done batches first: they are older than anything left to claim,
    // and the trainer waits for them in order.
    if (!protocol.try_take_redo(claim, control.current_batch) &&
        !protocol.try_claim(claim, &control.current_batch, deal)) {
      control.current_batch.store(ring::kNoBatch, std::memory_order_release);
      ring::futex_wait(claims.plan_signal, signal, kRecheckNs);
      continue;
    }
    if (protocol.cancelled(claim.batch_id)) {
      control.current_batch.store(ring::kNoBatch, std::memory_order_release);
      continue;
    }
    uint64_t wait_start = ring::monotonic_ns();
    bool acquired = protocol.acquire_for_fill(claim.batch_id, keep_going);
    control.slot_wait_ns.fetch_add(ring::monotonic_ns() - wait_start,
                                   std::memory_order_relaxed);
    if (acquired) return claim;
    control.current_batch.store(ring::kNoBatch, std::memory_order_release);
  }
  return std::nullopt;
}

}  // namespace ringloader::worker
