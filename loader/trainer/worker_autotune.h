// SPDX-License-Identifier: BSD-3-Clause
// num_workers = kAutoWorkers: choosing the worker count by measurement, in
// the trainer. Every window (at least kWindowSeconds and kWindowBatches
// batches handed out) it looks at the trainer's stall (time next() waited
// for a batch / wall time), the machine's idle cores (/proc/stat) and the
// throughput (samples handed out per second), and:
//   * after adding a worker, skips one window (the worker starts), then
//     compares the throughput with the one before: below +min_gain, it
//     retires that worker again and stops for good (settled);
//   * adds a worker when the trainer stalls (> stall_threshold) and at
//     least idle_cores_threshold cores are idle;
//   * stops at max_workers.
// Adding is safe mid-epoch: batches are claimed through one CAS on the
// ring's claim word by whoever comes, and a batch's bytes depend only on
// (seed, epoch, sample). Retiring too: the worker claims nothing more,
// finishes the batch it holds and exits (WorkerControl::retire).
//
// Thread-safety: used by the thread that calls Loader::next() only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ringloader::trainer {

// One measurement window.
struct AutotuneWindow {
  double seconds = 0;
  int64_t batches = 0;
  int64_t samples = 0;
  double trainer_wait_s = 0;  // of it, the trainer waiting for data
  double idle_cores = 0;      // machine-wide, averaged over the window
};

struct AutotuneOptions {
  int start_workers = 1;
  int max_workers = 1;
  double stall_threshold = 0.10;      // share of wall time waiting
  double min_gain = 0.10;             // throughput gain that keeps a worker
  double idle_cores_threshold = 0.5;
  double window_s = 0.5;
  int64_t window_batches = 8;
};

// Test and bench knobs: $RINGLOADER_AUTOTUNE_WINDOW_S (window length; its
// batch minimum drops to 2) and $RINGLOADER_AUTOTUNE_MIN_IDLE_CORES.
void autotune_overrides_from_env(AutotuneOptions& options);

// The policy alone, fed windows: deterministic, unit-tested.
class AutotunePolicy {
 public:
  enum class Action { kKeep, kAdd, kRetire, kSettle };
  explicit AutotunePolicy(AutotuneOptions options);
  // Decides on one window with `workers` running; `why` says what and why
  // when the decision (or the reason to keep) changed, else stays empty.
  Action decide(const AutotuneWindow& window, int workers, std::string& why);
  bool settled() const { return settled_; }

 private:
  AutotuneOptions options_;
  bool settled_ = false;
  bool warming_ = false;           // the window after an add is skipped
  double rate_before_add_ = -1;    // samples/s before the last add
  std::string last_reason_;
};

// Reads the machine's idle CPU time (idle + iowait, in cores) from
// /proc/stat between two calls; 0 when it cannot be read.
class IdleCores {
 public:
  IdleCores();
  double sample();  // idle cores averaged since the last call

 private:
  uint64_t idle_ = 0, total_ = 0;
  int cores_ = 1;
};

class WorkerAutotune {
 public:
  // `add_worker` starts one more worker, `retire_worker` retires the one
  // added last; `workers` tells how many run.
  WorkerAutotune(AutotuneOptions options, std::function<void()> add_worker,
                 std::function<void()> retire_worker, std::function<int()> workers);
  // After each batch the trainer hands out: its sample count and the
  // trainer's total wait so far.
  void on_batch(int64_t samples, uint64_t trainer_wait_ns);
  const std::vector<std::string>& decisions() const { return decisions_; }

 private:
  void start_window(uint64_t trainer_wait_ns);
  void record(const std::string& decision);

  AutotunePolicy policy_;
  std::function<void()> add_worker_;
  std::function<void()> retire_worker_;
  std::function<int()> workers_;
  AutotuneOptions options_;
  IdleCores idle_;
  uint64_t window_start_ns_ = 0;
  uint64_t wait_at_start_ns_ = 0;
  int64_t batches_ = 0, samples_ = 0, total_batches_ = 0;
  std::vector<std::string> decisions_;
};

}  // namespace ringloader::trainer
