// SPDX-License-Identifier: BSD-3-Clause
// What the trainer does when a worker dies or hangs: finds the batch the
// worker owned, has it produced again by another worker (the redo queue in
// the ring), replaces the worker, and gives up on a batch only after it has
// taken down `max_batch_retries` + 1 workers, naming the worker, the batch,
// the sample and its file. An epoch with workers killed at any point is
// byte-identical to an undisturbed one: every batch id is produced exactly
// once into its slot, and content depends only on (seed, epoch, sample).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loader/ring/ring.h"
#include "loader/ring/slot_protocol.h"
#include "loader/trainer/worker_pool.h"

namespace ringloader::trainer {

struct RecoveryOptions {
  // A worker whose heartbeat is older than this is hung (0: never).
  double hang_timeout_s = 0;
  // A worker not attached to the ring this long after its spawn is hung
  // too (0: never); ringloader::worker_start_timeout_s() gives the Loader's.
  double start_timeout_s = 0;
  int max_batch_retries = 2;
  // Respawns of one worker slot in a row, without it finishing a batch,
  // before the loader stops replacing it (a worker that cannot start).
  int max_consecutive_restarts = 5;
};

class WorkerRecovery {
 public:
  // `describe` turns a dataset index into "sample 17 (/data/cat/3.jpg)".
  WorkerRecovery(const ring::Ring& ring, const ring::SlotProtocol& protocol,
                 WorkerPool& pool, RecoveryOptions options,
                 std::function<std::string(int64_t)> describe);

  // Kills hung workers, reaps dead ones, re-queues what they owned and
  // replaces them. Throws WorkerError when a worker cannot be replaced
  // (after handling every other death it found), and whenever no worker is
  // left alive: a wait for a batch then could never end.
  void check();

  // If batch `batch_id` was given up on, marks its slot FAILED with the
  // reason (once the slot is free for it) and returns true, so the caller
  // raises it like any failed batch.
  bool fail_if_given_up(uint64_t batch_id);
  // Forgets bookkeeping for ids an abandoned epoch cancelled.
  void forget_before(uint64_t batch_id);

  int64_t restarts() const { return restarts_; }
  int64_t redone_batches() const { return redone_; }

 private:
  struct Death {
    WorkerExit exit;
    uint64_t batch = ring::kNoBatch;
    int64_t sample = -1;
    std::string hang;  // why it was killed for hanging, or empty
  };
  void kill_hung_workers();
  void judge_start(int index, uint64_t now);  // a worker not yet attached
  void require_live_worker() const;
  void handle(const Death& death);
  // Whether a dead worker's batch must be produced again: kIfNoLiveOwner
  // while a live worker names it too (re-checked by recheck_contested).
  // Resets a FILLING slot of the dead worker to FREE when kYes; moves one
  // left FILLING for a cancelled batch on to the slot's next live batch.
  enum class Redo { kNo, kYes, kIfNoLiveOwner };
  Redo needs_redo(int dead_index, uint64_t batch_id);
  std::string redo_or_give_up(uint64_t batch_id, const std::string& what);
  void recheck_contested();
  void requeue(uint64_t batch_id);
  void flush_pending();
  std::string describe(const Death& death) const;
  void replace(const Death& death, const std::string& what);

  const ring::Ring& ring_;
  const ring::SlotProtocol& protocol_;
  WorkerPool& pool_;
  RecoveryOptions options_;
  std::function<std::string(int64_t)> describe_sample_;
  std::map<int, std::string> hung_;            // worker index -> why killed
  std::map<int, std::string> not_replaced_;     // worker index -> the error
  std::map<uint64_t, int> attempts_;           // batch id -> workers lost on it
  std::map<uint64_t, std::string> given_up_;   // batch id -> error text
  std::map<int, int> consecutive_restarts_;    // worker index -> count
  std::map<int, uint64_t> batches_at_restart_;
  std::deque<uint64_t> pending_redo_;          // the ring's queue was full
  std::map<uint64_t, std::string> contested_;  // batch id -> its dead owner
  int64_t restarts_ = 0;
  int64_t redone_ = 0;
};

}  // namespace ringloader::trainer
