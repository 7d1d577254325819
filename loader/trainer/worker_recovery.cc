// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/worker_recovery.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "loader/ring/futex.h"
#include "loader/ring/slot_validation.h"
#include "ringloader/errors.h"
#include "ringloader/options.h"

namespace ringloader::trainer {
namespace {

void log_line(const std::string& text) {
  std::string line = text + "\n";
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace

WorkerRecovery::WorkerRecovery(const ring::Ring& ring,
                               const ring::SlotProtocol& protocol,
                               WorkerPool& pool, RecoveryOptions options,
                               std::function<std::string(int64_t)> describe)
    : ring_(ring),
      protocol_(protocol),
      pool_(pool),
      options_(options),
      describe_sample_(std::move(describe)) {}

void WorkerRecovery::check() {
  kill_hung_workers();
  // Every death of this check is handled, even when one of them cannot be
  // replaced (handle throws): the others' batches are re-queued and they
  // are replaced. The first error is raised after.
  std::exception_ptr first_error;
  for (const WorkerExit& exit : pool_.reap()) {
    ring::WorkerControl& control = ring_.worker(static_cast<uint32_t>(exit.index));
    Death death;
    death.exit = exit;
    // Acquire: pairs with the claim CAS (release) that followed the intent.
    death.batch = control.current_batch.load(std::memory_order_acquire);
    death.sample = control.current_sample.load(std::memory_order_relaxed);
    auto hung = hung_.find(exit.index);
    if (hung != hung_.end()) {
      death.hang = hung->second;
      hung_.erase(hung);
    }
    try {
      handle(death);
    } catch (const WorkerError& error) {
      not_replaced_[exit.index] = error.what();
      if (!first_error) first_error = std::current_exception();
    }
  }
  recheck_contested();
  flush_pending();
  if (first_error) std::rethrow_exception(first_error);
  require_live_worker();
}

void WorkerRecovery::require_live_worker() const {
  for (int index = 0; index < pool_.size(); ++index) {
    if (pool_.pid(index) > 0) return;
  }
  // Nobody is left to fill the batch waited for: waiting would be forever.
  std::string text = "ringloader: no live worker is left to load batches (" +
                     std::to_string(pool_.size()) + " not replaced)";
  if (!not_replaced_.empty()) text += "; " + not_replaced_.begin()->second;
  throw WorkerError(text);
}

void WorkerRecovery::kill_hung_workers() {
  if (options_.hang_timeout_s <= 0) return;
  const uint64_t now = ring::monotonic_ns();
  const auto limit_ns = static_cast<uint64_t>(options_.hang_timeout_s * 1e9);
  for (int index = 0; index < pool_.size(); ++index) {
    if (pool_.pid(index) <= 0 || hung_.count(index)) continue;
    const ring::WorkerControl& control = ring_.worker(static_cast<uint32_t>(index));
    // A worker still starting has no heartbeat to judge yet; its start is
    // judged on its own, longer, bound. Unjudged, a worker stuck before it
    // attached (a fork that inherited a held lock) stalled the trainer forever.
    if (control.ready.load(std::memory_order_acquire) == 0) {
      judge_start(index, now);
      continue;
    }
    uint64_t beat = control.heartbeat_ns.load(std::memory_order_relaxed);
    if (now <= beat || now - beat < limit_ns) continue;
    hung_[index] = "made no progress for " +
                   std::to_string(static_cast<int>((now - beat) / 1'000'000)) +
                   " ms (hang_timeout_s " + std::to_string(options_.hang_timeout_s) +
                   ")";
    pool_.kill_worker(index);
  }
}

void WorkerRecovery::judge_start(int index, uint64_t now) {
  const uint64_t started = pool_.started_ns(index);
  const auto limit_ns = static_cast<uint64_t>(options_.start_timeout_s * 1e9);
  if (options_.start_timeout_s <= 0 || now <= started || now - started < limit_ns) return;
  hung_[index] = "did not attach to the ring in " +
                 std::to_string(static_cast<int>((now - started) / 1'000'000)) +
                 " ms after its start (start timeout " +
                 std::to_string(options_.start_timeout_s) +
                 " s: $RINGLOADER_WORKER_START_TIMEOUT_S, at least hang_timeout_s)";
  pool_.kill_worker(index);
}

std::string WorkerRecovery::describe(const Death& death) const {
  std::string text = "worker " + std::to_string(death.exit.index) + " (pid " +
                     std::to_string(death.exit.pid) + ") ";
  text += death.hang.empty() ? death.exit.how : "hung: it " + death.hang +
                                                    " and was killed";
  if (death.sample >= 0) text += " while loading " + describe_sample_(death.sample);
  if (death.batch != ring::kNoBatch) {
    text += death.sample >= 0 ? " in" : " while holding";
    text += " batch id " + std::to_string(death.batch);
  }
  return text;
}

void WorkerRecovery::handle(const Death& death) {
  const std::string what = describe(death);
  if (!death.exit.started && death.hang.empty() && death.exit.status_known &&
      !WIFSIGNALED(death.exit.status)) {
    // It never reached the ring: a broken installation or configuration,
    // which a replacement would repeat.
    throw WorkerError("ringloader: " + what + " before it started");
  }
  std::string about_batch;
  switch (needs_redo(death.exit.index, death.batch)) {
    case Redo::kYes:
      about_batch = redo_or_give_up(death.batch, what);
      break;
    case Redo::kIfNoLiveOwner:
      contested_[death.batch] = what;
      break;
    case Redo::kNo:
      break;
  }
  replace(death, what + about_batch);
}

std::string WorkerRecovery::redo_or_give_up(uint64_t batch_id, const std::string& what) {
  int& attempts = attempts_[batch_id];
  ++attempts;
  if (attempts > options_.max_batch_retries) {
    given_up_[batch_id] =
        what + "; this batch has now taken down " + std::to_string(attempts) +
        " workers (max_batch_retries " +
        std::to_string(options_.max_batch_retries) + "), so it is given up";
    return "; batch given up";
  }
  requeue(batch_id);
  return "; its batch is re-done (retry " + std::to_string(attempts) + " of " +
         std::to_string(options_.max_batch_retries) + ")";
}

// A live worker named a dead worker's batch too. It may own it, or its own
// claim CAS for that id may just have lost (its intent is cleared right
// after): look again at every check until that worker lets go, so a batch
// is never lost to an intent seen at the wrong instant.
void WorkerRecovery::recheck_contested() {
  for (auto it = contested_.begin(); it != contested_.end();) {
    Redo redo = needs_redo(-1, it->first);
    if (redo == Redo::kIfNoLiveOwner) {
      ++it;
      continue;
    }
    if (redo == Redo::kYes) {
      log_line("ringloader: " + it->second + redo_or_give_up(it->first, it->second));
    }
    it = contested_.erase(it);
  }
}

void WorkerRecovery::replace(const Death& death, const std::string& what) {
  const int index = death.exit.index;
  const uint64_t batches = ring_.worker(static_cast<uint32_t>(index))
                               .batches.load(std::memory_order_relaxed);
  int& in_a_row = consecutive_restarts_[index];
  in_a_row = batches_at_restart_[index] == batches ? in_a_row + 1 : 1;
  batches_at_restart_[index] = batches;
  if (in_a_row > options_.max_consecutive_restarts) {
    throw WorkerError("ringloader: " + what + "; worker " + std::to_string(index) +
                      " was replaced " + std::to_string(in_a_row - 1) +
                      " times in a row without finishing a batch, so the "
                      "loader stops replacing it");
  }
  pool_.respawn(index);
  ++restarts_;
  log_line("ringloader: " + what + "; replaced by pid " +
           std::to_string(pool_.pid(index)));
}

// kYes if the dead worker had claimed `batch_id` and nobody has produced
// or is producing it. Intents are written before the CAS that takes a
// batch, so an intent may name a batch the worker never got: the checks
// below rule out every other owner before the batch is re-queued.
WorkerRecovery::Redo WorkerRecovery::needs_redo(int dead_index, uint64_t batch_id) {
  if (batch_id == ring::kNoBatch) return Redo::kNo;
  const bool cancelled = protocol_.cancelled(batch_id);
  if (!cancelled) {
    if (batch_id >= protocol_.claimed_end()) return Redo::kNo;  // never claimed
    if (protocol_.redo_queued(batch_id)) return Redo::kNo;
    if (std::find(pending_redo_.begin(), pending_redo_.end(), batch_id) !=
        pending_redo_.end()) {
      return Redo::kNo;
    }
  }
  for (int index = 0; index < pool_.size(); ++index) {
    if (index == dead_index || pool_.pid(index) <= 0) continue;
    // Acquire: a live worker that moved on published the batch first.
    if (ring_.worker(static_cast<uint32_t>(index))
            .current_batch.load(std::memory_order_acquire) == batch_id) {
      return Redo::kIfNoLiveOwner;
    }
  }
  const uint32_t slot_count = ring_.geometry().slot_count;
  const uint32_t slot_index = ring::slot_of(batch_id, slot_count);
  ring::SlotControl& slot = ring_.slot(slot_index);
  uint32_t state = slot.state.load(std::memory_order_acquire);
  if (cancelled) {
    // An abandoned epoch's batch is never re-done, but a slot its dead
    // filler left FILLING would stay so (cancellation moves FREE, READY and
    // FAILED slots only), and the slot's next live batch would never come.
    uint32_t filling = ring::state_word(batch_id, slot_count, ring::kFilling);
    if (slot.state.compare_exchange_strong(
            filling, ring::state_word(batch_id, slot_count, ring::kFree),
            std::memory_order_acq_rel, std::memory_order_acquire)) {
      protocol_.advance_if_cancelled(slot_index);
    }
    return Redo::kNo;
  }
  uint64_t id = protocol_.id_of_state(state, slot_index);
  if (id > batch_id) return Redo::kNo;  // produced and consumed already
  if (id < batch_id) return Redo::kYes;  // the slot still holds an older batch
  switch (ring::phase_of(state)) {
    case ring::kFree:
      return Redo::kYes;
    case ring::kFilling:
      // The filler is dead (no live worker names this batch): nobody else
      // writes the slot, so it goes back to FREE for the redo.
      slot.state.store(ring::state_word(batch_id, slot_count, ring::kFree),
                       std::memory_order_release);
      return Redo::kYes;
    default:
      return Redo::kNo;  // READY, FAILED or LEASED: it was finished
  }
}

void WorkerRecovery::requeue(uint64_t batch_id) {
  ++redone_;
  pending_redo_.push_back(batch_id);
  flush_pending();
}

void WorkerRecovery::flush_pending() {
  while (!pending_redo_.empty()) {
    uint64_t batch_id = pending_redo_.front();
    if (!protocol_.cancelled(batch_id) && !protocol_.push_redo(batch_id)) return;
    pending_redo_.pop_front();
  }
}

bool WorkerRecovery::fail_if_given_up(uint64_t batch_id) {
  auto found = given_up_.find(batch_id);
  if (found == given_up_.end()) return false;
  const uint32_t slot_count = ring_.geometry().slot_count;
  ring::SlotControl& slot = ring_.slot_for_batch(batch_id);
  uint32_t free = ring::state_word(batch_id, slot_count, ring::kFree);
  // The slot may still hold the batch before it (leased): not yet.
  if (!slot.state.compare_exchange_strong(
          free, ring::state_word(batch_id, slot_count, ring::kFilling),
          std::memory_order_acq_rel, std::memory_order_acquire)) {
    return false;
  }
  slot.sample_count = 0;
  slot.error_kind = static_cast<uint32_t>(ring::ErrorKind::kOther);
  slot.error_sample = -1;
  const std::string text = ring::fit_error_text(found->second);
  std::memcpy(slot.error_text, text.c_str(), text.size() + 1);
  slot.filler.store(-1, std::memory_order_relaxed);
  given_up_.erase(found);
  protocol_.publish(batch_id, ring::kFailed);
  return true;
}

void WorkerRecovery::forget_before(uint64_t batch_id) {
  attempts_.erase(attempts_.begin(), attempts_.lower_bound(batch_id));
  contested_.erase(contested_.begin(), contested_.lower_bound(batch_id));
  given_up_.erase(given_up_.begin(), given_up_.lower_bound(batch_id));
}

}  // namespace ringloader::trainer

namespace ringloader {

double worker_start_timeout_s(double hang_timeout_s) {
  if (hang_timeout_s <= 0) return 0;
  double start_s = 120;
  if (const char* text = std::getenv("RINGLOADER_WORKER_START_TIMEOUT_S")) {
    char* end = nullptr;
    start_s = std::strtod(text, &end);
    if (end == text || *end != '\0' || !std::isfinite(start_s) || start_s <= 0) {
      throw OptionError("ringloader: $RINGLOADER_WORKER_START_TIMEOUT_S must be a number "
                        "of seconds > 0, not '" + std::string(text) + "'");
    }
  }
  return std::max(start_s, hang_timeout_s);
}

}  // namespace ringloader
