// SPDX-License-Identifier: BSD-3-Clause
// The fence protocol on slot state words, and batch claims. Batch b always
// lives in slot b % K; its state word moves
//
//   FREE(b) -> FILLING(b) -> READY(b) | FAILED(b) -> LEASED(b) -> FREE(b + K)
//   filler     filler         filler                 trainer      trainer
//
// Every transition is a release store or acq_rel CAS followed by a futex
// wake; every wait is an acquire load in a futex loop. Nothing spins.
//
// Cancellation: when an epoch is abandoned, unconsumed batch ids below
// `cancel_before` are dropped. Whoever sees a slot parked on a cancelled id
// (FREE, READY or FAILED) moves it on to the next live id of that slot. The
// parties that publish a slot state and the trainer that publishes a cancel
// both store first and load the other's word after (sequentially
// consistent), so at least one of them sees the other and no slot is left
// parked on a dead id.
#pragma once

#include <atomic>
#include <cstdint>

#include "loader/ring/futex.h"
#include "loader/ring/ring.h"

namespace ringloader::ring {

inline uint32_t slot_of(uint64_t batch_id, uint32_t slot_count) {
  return static_cast<uint32_t>(batch_id % slot_count);
}
inline uint32_t state_word(uint64_t batch_id, uint32_t slot_count,
                           SlotPhase phase) {
  uint32_t generation =
      static_cast<uint32_t>(batch_id / slot_count) & kGenerationMask;
  return (generation << kPhaseBits) | phase;
}
inline SlotPhase phase_of(uint32_t state) {
  return static_cast<SlotPhase>(state & kPhaseMask);
}

// A claimed batch: its global id and where its samples are listed.
struct Claim {
  uint64_t batch_id = 0;
  uint64_t local_index = 0;  // batch index within its epoch
  uint64_t epoch = 0;
  uint64_t sample_count = 0;  // samples in the epoch
  uint64_t order_table = 0;
};

// Which of a plan's batches a worker may claim (SlotProtocol::try_claim).
struct ClaimDeal {
  uint32_t index = 0;
  uint32_t count = 0;  // 0 or 1: any batch
};

class SlotProtocol {
 public:
  explicit SlotProtocol(const Ring& ring) : ring_(ring) {}

  // Threads: each method says which party calls it. "Worker" is a filler
  // process's claim loop (loader/worker/claim_loop.h); "trainer" is the
  // trainer's thread (loader/trainer); "either" is both: the trainer fills
  // batches itself when num_workers is 0 (Loader::Impl::fill_in_process).
  // Any number of workers run at once, each with its own SlotProtocol over
  // the same ring; all cross-process state is in the ring's atomics.

  // --- claims ---
  // Either. Takes the next batch of the current plan. False when the plan is used
  // up (wait on plan_signal, then try again). `intent`, when given, receives
  // the candidate id before the CAS that takes it (see WorkerControl).
  // With `deal` (one of deal.count workers dealt batches round-robin, as
  // torch's DataLoader deals them), only a batch whose index in the plan is
  // deal.index modulo deal.count: false while the next one is another
  // worker's. A dealt claim wakes the other workers: the turn is theirs.
  using Deal = ClaimDeal;
  bool try_claim(Claim& claim,
                 std::atomic<uint64_t>* intent = nullptr, Deal deal = {}) const;
  // Worker. Takes a batch from the redo queue, if any live one is there, as a claim
  // of the current plan. Cancelled entries are dropped on the way.
  bool try_take_redo(Claim& claim, std::atomic<uint64_t>& intent) const;
  // Trainer: queues `batch_id` to be produced again. False if the queue is
  // full (the caller keeps it and tries again later).
  bool push_redo(uint64_t batch_id) const;
  // Trainer: whether `batch_id` waits in the redo queue.
  bool redo_queued(uint64_t batch_id) const;
  // Trainer: batches of the current plan claimed so far end before this id.
  uint64_t claimed_end() const;
  // Trainer: closes the current plan and publishes the next epoch's, which
  // starts after the last claimed id (with kSkipLeased, skipping ahead past
  // slots the caller still leases; kContiguous keeps ids contiguous across
  // epochs). Ids claimed but not consumed are cancelled. Returns the new
  // plan's first batch id.
  enum class PlanStart { kSkipLeased, kContiguous };
  uint64_t publish_plan(uint64_t epoch, uint64_t batch_count, uint64_t sample_count,
                        uint64_t order_table, PlanStart start = PlanStart::kSkipLeased) const;
  // Trainer: lets the current plan's claims go on to `batch_count` batches
  // over `sample_count` samples, both no smaller than before; the caller
  // wrote the new entries to the plan's order table first. Nothing claimed
  // is cancelled. The trainer publishes a long epoch's order a window at a
  // time (Loader::Impl::publish_more): a batch once claimable stays
  // claimable with the same samples, because extensions only ever add
  // whole batches after the last one, until the one that ends the epoch.
  void extend_plan(uint64_t batch_count, uint64_t sample_count) const;

  // --- filler side ---
  // Either. Waits until the slot of `batch_id` is FREE for it and takes it
  // (FILLING). Returns false if the id was cancelled or `keep_waiting`
  // returned false (shutdown). `keep_waiting` runs on every wake-up and
  // time-out of the wait.
  template <typename KeepWaiting>
  bool acquire_for_fill(uint64_t batch_id, KeepWaiting keep_waiting) const;
  // Either (the trainer for a dead worker's batch, worker_recovery.cc).
  // READY or FAILED, then moves the slot on if the id was cancelled meanwhile.
  void publish(uint64_t batch_id, SlotPhase phase) const;

  // --- trainer side ---
  // Trainer. READY -> LEASED. Precondition: the slot is READY for batch_id.
  void lease(uint64_t batch_id) const;
  // Trainer, or any thread of the trainer's process that drops a batch's
  // last tensor (through SlotReleaser). Calls for different batches may
  // run at once: each touches only its own slot's state word.
  // LEASED or FAILED -> FREE for the slot's next live batch. Does nothing
  // in any process but the ring's owner (a fork child of the trainer).
  void release(uint64_t batch_id) const;

  // Either: whether `batch_id` lies below the cancel mark.
  bool cancelled(uint64_t batch_id) const;
  // Either. The first id >= batch_id in the same slot that is not cancelled.
  uint64_t next_live_id(uint64_t batch_id) const;
  // Either. Moves a slot parked on a cancelled id (FREE/READY/FAILED) on.
  void advance_if_cancelled(uint32_t slot) const;
  // Either. The batch id a slot's state word refers to.
  uint64_t id_of_state(uint32_t state, uint32_t slot) const;

 private:
  bool claim_of_plan(uint64_t batch_id, Claim& claim) const;
  bool plan_in_bounds(const Claim& claim) const;
  uint64_t skip_leased_slots(uint64_t first) const;
  bool try_acquire(uint64_t batch_id) const;
  const Ring& ring_;
};

template <typename KeepWaiting>
bool SlotProtocol::acquire_for_fill(uint64_t batch_id,
                                    KeepWaiting keep_waiting) const {
  SlotControl& slot = ring_.slot_for_batch(batch_id);
  constexpr int64_t kRecheckNs = 50'000'000;  // shutdown / parent checks
  for (;;) {
    if (try_acquire(batch_id)) return true;
    if (cancelled(batch_id)) {
      advance_if_cancelled(slot_of(batch_id, ring_.geometry().slot_count));
      return false;
    }
    uint32_t seen = slot.state.load(std::memory_order_acquire);
    if (seen == state_word(batch_id, ring_.geometry().slot_count, kFree)) {
      continue;
    }
    if (!keep_waiting()) return false;
    futex_wait(slot.state, seen, kRecheckNs);
  }
}

}  // namespace ringloader::ring
