// SPDX-License-Identifier: BSD-3-Clause
// The Loader's side of leases: freeing a slot that a live batch still
// holds when the trainer needs it (fence wait, spill, or LeaseError), a
// batch handed back (put_back), and batches that fail or break the ring
// protocol.
#include <algorithm>

#include "loader/ring/futex.h"
#include "loader/ring/slot_validation.h"
#include "loader/trainer/loader_impl.h"

namespace ringloader {

void Loader::Impl::free_leased_slot(uint64_t batch_id, uint32_t state) {
  if (ring::phase_of(state) != ring::kLeased) return;
  const uint32_t index = ring::slot_of(batch_id, ring_->geometry().slot_count);
  const uint64_t holder = protocol_->id_of_state(state, index);
  // Dead already, its slot held back only by GPU work still reading it.
  if (releaser_->flush_through(holder)) return;
  // Its holder drops it on its own time; wait_for() keeps waiting.
  if (wait_for_held_slots_) return;
  if (options_.held_batches == HeldBatches::kSpill && held_.spill(holder)) {
    releaser_->flush_through(holder);  // the spill's release may be fenced
    return;
  }
  ring::SlotControl& slot = ring_->slot(index);
  // Another thread may be dropping that batch right now: give it a moment.
  ring::futex_wait(slot.state, state,
                   static_cast<int64_t>(options_.poll_interval_s * 1e9));
  if (slot.state.load(std::memory_order_acquire) != state) return;
  if (releaser_->flush_through(holder)) return;
  throw LeaseError(
      "ringloader: all " + std::to_string(options_.ring_slots) +
      " ring slots are held by live batches, so batch " +
      std::to_string(epoch_.cursor()) + " of epoch " + std::to_string(epoch_.epoch()) +
      " can never be produced" +
      (options_.held_batches == HeldBatches::kRaise ? " (held_batches = kRaise)" : "") +
      ". Drop earlier batches' "
      "tensors (or clone what you keep), raise LoaderOptions::ring_slots, or "
      "let held batches spill.");
}

// A batch handed out comes back unseen by the caller (a binding whose caller
// was interrupted before it got it): next() returns it again first.
void Loader::Impl::put_back(Batch batch) {
  if (put_back_ || handed_out_ == 0 || !epoch_.open() || batch.epoch != epoch_.epoch()) {
    throw Error("ringloader: put_back() takes back only the batch the last next() "
                "returned, once");
  }
  put_back_ = std::move(batch);
  --handed_out_;
}

void Loader::Impl::wait_while_leased(ring::SlotControl& slot) {
  const auto check_ns = static_cast<int64_t>(Loader::kWaitCheckInterval_s * 1e9);
  const uint64_t start = ring::monotonic_ns();
  for (uint32_t state = slot.state.load(std::memory_order_acquire);
       ring::phase_of(state) == ring::kLeased;
       state = slot.state.load(std::memory_order_acquire)) {
    check_timeout(start);
    // Nothing of the batch is claimed yet, so the check may throw.
    if (wait_check_) (*wait_check_)();
    releaser_->poll();
    ring::futex_wait(slot.state, state, check_ns);
  }
}

std::string Loader::Impl::where() const {
  return "batch " + std::to_string(epoch_.cursor()) + " of epoch " +
         std::to_string(epoch_.epoch());
}

void Loader::Impl::raise_failure(uint64_t batch_id) {
  ring::FailedSlot failed = ring::read_failed_slot(*ring_, batch_id);
  std::string where = "ringloader: " + this->where();
  FailedBatch reported{batch_id, epoch_.epoch(), epoch_.cursor(), -1, 0};
  if (pool_ && failed.filler >= 0) {
    reported.worker = failed.filler;
    reported.worker_pid = ring_->worker(static_cast<uint32_t>(failed.filler))
                              .pid.load(std::memory_order_relaxed);
    where += " (worker " + std::to_string(failed.filler) + ", pid " +
             std::to_string(reported.worker_pid) + ")";
  }
  std::string message = where + ": " + failed.text;
  if (!failed.note.empty()) message += " [" + failed.note + "]";
  // The batch is lost for this epoch; its slot goes back to the workers so
  // iteration can go on if the caller chooses to.
  protocol_->release(batch_id);
  epoch_.advance();
  if (failed.kind == ring::ErrorKind::kDecode) throw DecodeError(message);
  if (failed.kind == ring::ErrorKind::kIo) throw IoError(message);
  throw WorkerError(message, reported);
}

void Loader::Impl::reject_batch(uint64_t batch_id, const std::string& violation) {
  const int32_t filler =
      ring::read_filler(*ring_, ring::slot_of(batch_id, ring_->geometry().slot_count));
  std::string message = "ringloader: " + where() + ": " + violation;
  // A worker that breaks the protocol is broken or hostile: it goes, and
  // the recovery path re-does what it held and replaces it. The filler
  // word is the worker's own claim, so at worst an innocent is replaced.
  if (pool_ && filler >= 0 && filler < pool_->size() && pool_->pid(filler) > 0) {
    message += " (the slot names worker " + std::to_string(filler) +
               " as its filler: it is killed and replaced)";
    pool_->kill_worker(filler);
  }
  // The batch is lost for this epoch, as a FAILED one is.
  protocol_->release(batch_id);
  epoch_.advance();
  throw WorkerError(message);
}

}  // namespace ringloader
