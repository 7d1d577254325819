// SPDX-License-Identifier: BSD-3-Clause
#include "loader/ring/slot_protocol.h"

#include "loader/ring/fault_point.h"
#include "loader/ring/futex.h"

#include <vector>

namespace ringloader::ring {

bool SlotProtocol::try_claim(Claim& claim,
                             std::atomic<uint64_t>* intent, Deal deal) const {
  ClaimControl& claims = ring_.claims();
  uint64_t word = claims.claim.load(std::memory_order_acquire);
  for (;;) {
    uint64_t tag = word >> kClaimTagShift;
    uint64_t claimed = word & kClaimCountMask;
    const Plan& plan = ring_.plan(tag);
    // Read the plan before the CAS: if the CAS succeeds the tag did not move,
    // so the plan was not rewritten while we read it.
    Claim candidate;
    uint64_t first = plan.first_batch.load(std::memory_order_relaxed);
    // Acquire, and before the sample count: pairs with extend_plan's
    // release, so the entries and count of a batch it added are seen.
    uint64_t count = plan.batch_count.load(std::memory_order_acquire);
    candidate.epoch = plan.epoch.load(std::memory_order_relaxed);
    candidate.sample_count = plan.sample_count.load(std::memory_order_relaxed);
    candidate.order_table = plan.order_table.load(std::memory_order_relaxed);
    if (plan.tag.load(std::memory_order_relaxed) != tag) {
      // Plan t's slot is rewritten only for t + 4, after the word has moved
      // past t: a word that has not moved names a plan nobody published (a
      // peer wrote it). Nothing to claim; spinning on it would never end.
      const uint64_t seen = word;
      word = claims.claim.load(std::memory_order_acquire);
      if (word == seen) return false;
      continue;
    }
    if (claimed >= count || !plan_in_bounds(candidate)) return false;
    if (deal.count > 1 && claimed % deal.count != deal.index) return false;
    // Relaxed is enough: the CAS below releases it to whoever acquires the
    // claim word (the trainer, when it looks for a dead worker's batch).
    if (intent) intent->store(first + claimed, std::memory_order_relaxed);
    RINGLOADER_FAULT_POINT("claim.before_cas");
    if (claims.claim.compare_exchange_weak(word, word + 1,
                                           std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
      candidate.batch_id = first + claimed;
      candidate.local_index = claimed;
      claim = candidate;
      if (deal.count > 1) {
        // Release: the claim word moved first, so a woken worker sees its turn.
        claims.plan_signal.fetch_add(1, std::memory_order_release);
        futex_wake_all(claims.plan_signal);
      }
      return true;
    }
    // Lost: someone else took that id. An intent left naming it would hide
    // the winner's batch from the trainer if the winner died (never re-done).
    if (intent) intent->store(kNoBatch, std::memory_order_relaxed);
  }
}

bool SlotProtocol::plan_in_bounds(const Claim& claim) const {
  // Only the trainer publishes plans, but any worker can write them: a
  // filler picks the order table with this, so one out of bounds is no plan
  // at all. Sample positions need no check: entries are read modulo the
  // table's capacity (Ring::order_entry).
  return claim.order_table < 2;
}

bool SlotProtocol::claim_of_plan(uint64_t batch_id, Claim& claim) const {
  uint64_t word = ring_.claims().claim.load(std::memory_order_acquire);
  const Plan& plan = ring_.plan(word >> kClaimTagShift);
  uint64_t first = plan.first_batch.load(std::memory_order_relaxed);
  uint64_t count = plan.batch_count.load(std::memory_order_acquire);  // see try_claim
  if (batch_id < first || batch_id >= first + count) return false;
  claim.batch_id = batch_id;
  claim.local_index = batch_id - first;
  claim.epoch = plan.epoch.load(std::memory_order_relaxed);
  claim.sample_count = plan.sample_count.load(std::memory_order_relaxed);
  claim.order_table = plan.order_table.load(std::memory_order_relaxed);
  if (!plan_in_bounds(claim)) return false;
  // A plan published meanwhile cancelled this id; the caller drops it.
  return (ring_.claims().claim.load(std::memory_order_acquire) >> kClaimTagShift) ==
         (word >> kClaimTagShift);
}

bool SlotProtocol::try_take_redo(Claim& claim,
                                 std::atomic<uint64_t>& intent) const {
  for (std::atomic<uint64_t>& entry : ring_.redo().batch) {
    uint64_t batch_id = entry.load(std::memory_order_acquire);
    if (batch_id == kNoBatch) continue;
    intent.store(batch_id, std::memory_order_relaxed);
    if (entry.compare_exchange_strong(batch_id, kNoBatch,
                                      std::memory_order_acq_rel,
                                      std::memory_order_acquire) &&
        !cancelled(batch_id) && claim_of_plan(batch_id, claim)) {
      return true;
    }
    // Lost to another worker, or dropped: name nothing (see try_claim).
    intent.store(kNoBatch, std::memory_order_relaxed);
  }
  intent.store(kNoBatch, std::memory_order_relaxed);
  return false;
}

bool SlotProtocol::push_redo(uint64_t batch_id) const {
  for (std::atomic<uint64_t>& entry : ring_.redo().batch) {
    uint64_t empty = kNoBatch;
    // Release: the slot reset (FILLING -> FREE) the trainer did first is
    // visible to the worker that takes the entry.
    if (entry.compare_exchange_strong(empty, batch_id,
                                      std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      ClaimControl& claims = ring_.claims();
      claims.plan_signal.fetch_add(1, std::memory_order_release);
      futex_wake_all(claims.plan_signal);
      return true;
    }
  }
  return false;
}

bool SlotProtocol::redo_queued(uint64_t batch_id) const {
  for (const std::atomic<uint64_t>& entry : ring_.redo().batch) {
    if (entry.load(std::memory_order_acquire) == batch_id) return true;
  }
  return false;
}

uint64_t SlotProtocol::claimed_end() const {
  uint64_t word = ring_.claims().claim.load(std::memory_order_acquire);
  const Plan& plan = ring_.plan(word >> kClaimTagShift);
  return plan.first_batch.load(std::memory_order_relaxed) +
         (word & kClaimCountMask);
}

uint64_t SlotProtocol::skip_leased_slots(uint64_t first) const {
  // Batches the caller still holds (e.g. the last one of an abandoned epoch,
  // alive until the first batch of the next arrives) pin their slots. Start
  // the plan where the run of unleased slots is longest, so its first
  // batches never wait on them. Skipped ids are cancelled like unconsumed
  // ones: nothing is lost, ids only need to increase.
  const uint32_t slot_count = ring_.geometry().slot_count;
  std::vector<bool> leased(slot_count);
  for (uint32_t s = 0; s < slot_count; ++s) {
    leased[s] = phase_of(ring_.slot(s).state.load(std::memory_order_acquire)) == kLeased;
  }
  uint64_t best = first;
  uint32_t best_run = 0;
  for (uint32_t offset = 0; offset < slot_count; ++offset) {
    uint32_t run = 0;
    while (run < slot_count && !leased[(first + offset + run) % slot_count]) ++run;
    if (run > best_run) {
      best_run = run;
      best = first + offset;
    }
  }
  return best;
}

uint64_t SlotProtocol::publish_plan(uint64_t epoch, uint64_t batch_count,
                                    uint64_t sample_count, uint64_t order_table,
                                    PlanStart start) const {
  ClaimControl& claims = ring_.claims();
  uint64_t word = claims.claim.load(std::memory_order_acquire);
  uint64_t first = 0;
  for (;;) {
    uint64_t tag = word >> kClaimTagShift;
    uint64_t claimed = word & kClaimCountMask;
    uint64_t next_tag = (tag + 1) & 0xffff;
    first = ring_.plan(tag).first_batch.load(std::memory_order_relaxed) + claimed;
    if (start == PlanStart::kSkipLeased) first = skip_leased_slots(first);
    Plan& next = ring_.plan(next_tag);
    next.tag.store(next_tag, std::memory_order_relaxed);
    next.first_batch.store(first, std::memory_order_relaxed);
    next.batch_count.store(batch_count, std::memory_order_relaxed);
    next.sample_count.store(sample_count, std::memory_order_relaxed);
    next.epoch.store(epoch, std::memory_order_relaxed);
    next.order_table.store(order_table, std::memory_order_relaxed);
    // Release: the plan and its order table are visible to whoever acquires
    // the new claim word.
    if (claims.claim.compare_exchange_weak(word, next_tag << kClaimTagShift,
                                           std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
      break;
    }
  }
  claims.cancel_before.store(first, std::memory_order_seq_cst);
  for (uint32_t slot = 0; slot < ring_.geometry().slot_count; ++slot) {
    advance_if_cancelled(slot);
  }
  claims.plan_signal.fetch_add(1, std::memory_order_release);
  futex_wake_all(claims.plan_signal);
  return first;
}

void SlotProtocol::extend_plan(uint64_t batch_count, uint64_t sample_count) const {
  ClaimControl& claims = ring_.claims();
  // Only the trainer publishes plans, so the claim word's tag names its own
  // latest plan and nobody rewrites that plan meanwhile.
  Plan& plan = ring_.plan(claims.claim.load(std::memory_order_acquire) >> kClaimTagShift);
  plan.sample_count.store(sample_count, std::memory_order_relaxed);
  // Release: the entries and sample count above are visible to a claimer
  // that acquires the new count (try_claim, claim_of_plan).
  plan.batch_count.store(batch_count, std::memory_order_release);
  claims.plan_signal.fetch_add(1, std::memory_order_release);
  futex_wake_all(claims.plan_signal);
}

bool SlotProtocol::try_acquire(uint64_t batch_id) const {
  const uint32_t slot_count = ring_.geometry().slot_count;
  SlotControl& slot = ring_.slot_for_batch(batch_id);
  uint32_t expected = state_word(batch_id, slot_count, kFree);
  return slot.state.compare_exchange_strong(
      expected, state_word(batch_id, slot_count, kFilling),
      std::memory_order_acq_rel, std::memory_order_acquire);
}

void SlotProtocol::publish(uint64_t batch_id, SlotPhase phase) const {
  const uint32_t slot_count = ring_.geometry().slot_count;
  uint32_t index = slot_of(batch_id, slot_count);
  SlotControl& slot = ring_.slot(index);
  slot.state.store(state_word(batch_id, slot_count, phase),
                   std::memory_order_seq_cst);
  futex_wake_all(slot.state);
  if (cancelled(batch_id)) {
    // A filler that dies here leaves a cancelled batch READY (or FAILED) in
    // its slot: the trainer's wait moves such a slot on (LoaderImpl::wait_for).
    RINGLOADER_FAULT_POINT("publish.cancelled_before_advance");
    advance_if_cancelled(index);
  }
}

void SlotProtocol::lease(uint64_t batch_id) const {
  const uint32_t slot_count = ring_.geometry().slot_count;
  SlotControl& slot = ring_.slot_for_batch(batch_id);
  // Relaxed: LEASED publishes nothing. Only this thread acts on it (it
  // acquired READY with an acquire load before calling), no filler waits
  // for it (fillers wait for FREE) and no canceller moves it (they move
  // FREE, READY and FAILED only). The order that matters, the trainer's
  // reads of the slot before a filler's writes, is release()'s store.
  slot.state.store(state_word(batch_id, slot_count, kLeased),
                   std::memory_order_relaxed);
}

void SlotProtocol::release(uint64_t batch_id) const {
  // A trainer's fork child drops its copies of the parent's batches (its
  // garbage collector, its exit): the parent still holds them. Only the
  // process that leased a slot may hand it back.
  if (!ring_.owned_here()) return;
  const uint32_t slot_count = ring_.geometry().slot_count;
  uint32_t index = slot_of(batch_id, slot_count);
  SlotControl& slot = ring_.slot(index);
  uint64_t next = next_live_id(batch_id + slot_count);
  // At least release: the trainer's reads of the slot happen before the
  // writes of the filler that acquires FREE. Sequentially consistent because
  // advance_if_cancelled() below then loads the cancel word: a store to one
  // word followed by a load of another is only ordered under seq_cst, and
  // the cancelling trainer does the mirror image (header, "Cancellation").
  slot.state.store(state_word(next, slot_count, kFree),
                   std::memory_order_seq_cst);
  futex_wake_all(slot.state);
  advance_if_cancelled(index);
}

bool SlotProtocol::cancelled(uint64_t batch_id) const {
  return batch_id <
         ring_.claims().cancel_before.load(std::memory_order_seq_cst);
}

uint64_t SlotProtocol::next_live_id(uint64_t batch_id) const {
  const uint64_t slot_count = ring_.geometry().slot_count;
  uint64_t cancel = ring_.claims().cancel_before.load(std::memory_order_seq_cst);
  if (batch_id >= cancel) return batch_id;
  uint64_t steps = (cancel - batch_id + slot_count - 1) / slot_count;
  return batch_id + steps * slot_count;
}

uint64_t SlotProtocol::id_of_state(uint32_t state, uint32_t slot) const {
  // Generations wrap at 2^29; ids in play are within a few rounds of the
  // cancel point, so pick the id with this generation nearest to it.
  const uint64_t slot_count = ring_.geometry().slot_count;
  uint64_t reference =
      ring_.claims().cancel_before.load(std::memory_order_seq_cst) / slot_count;
  uint64_t generation = state >> kPhaseBits;
  constexpr uint64_t kWrap = uint64_t{kGenerationMask} + 1;
  uint64_t base = reference - (reference % kWrap);
  uint64_t full = base + generation;
  if (full > reference + kWrap / 2 && full >= kWrap) full -= kWrap;
  if (full + kWrap / 2 < reference) full += kWrap;
  return full * slot_count + slot;
}

void SlotProtocol::advance_if_cancelled(uint32_t index) const {
  const uint32_t slot_count = ring_.geometry().slot_count;
  SlotControl& slot = ring_.slot(index);
  uint32_t state = slot.state.load(std::memory_order_seq_cst);
  for (;;) {
    SlotPhase phase = phase_of(state);
    if (phase == kFilling || phase == kLeased) return;
    uint64_t id = id_of_state(state, index);
    if (!cancelled(id)) return;
    uint32_t moved = state_word(next_live_id(id), slot_count, kFree);
    if (slot.state.compare_exchange_strong(state, moved,
                                           std::memory_order_seq_cst)) {
      futex_wake_all(slot.state);
      return;
    }
  }
}

}  // namespace ringloader::ring
