// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/worker_autotune.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "loader/ring/futex.h"

namespace ringloader::trainer {
namespace {

template <typename... Values>
std::string format(const char* pattern, Values... values) {
  char text[160];
  std::snprintf(text, sizeof(text), pattern, values...);
  return text;
}

}  // namespace

void autotune_overrides_from_env(AutotuneOptions& options) {
  if (const char* window = std::getenv("RINGLOADER_AUTOTUNE_WINDOW_S")) {
    options.window_s = std::atof(window);
    options.window_batches = 2;
  }
  if (const char* idle = std::getenv("RINGLOADER_AUTOTUNE_MIN_IDLE_CORES")) {
    options.idle_cores_threshold = std::atof(idle);
  }
}

AutotunePolicy::AutotunePolicy(AutotuneOptions options) : options_(options) {}

AutotunePolicy::Action AutotunePolicy::decide(const AutotuneWindow& window, int workers,
                                              std::string& why) {
  why.clear();
  if (settled_ || window.seconds <= 0) return Action::kKeep;
  if (warming_) {  // the new worker was starting during this window
    warming_ = false;
    return Action::kKeep;
  }
  const double rate = window.samples / window.seconds;
  const double stall = window.trainer_wait_s / window.seconds;
  if (rate_before_add_ > 0) {
    const double gain = rate / rate_before_add_ - 1;
    const double before = rate_before_add_;
    rate_before_add_ = -1;
    if (gain < options_.min_gain) {
      settled_ = true;
      why = "worker " + std::to_string(workers) + " raised throughput " +
            format("%+.0f%% (%.0f -> %.0f samples/s): back to ", gain * 100, before, rate) +
            std::to_string(workers - 1) + " workers, settled";
      return Action::kRetire;
    }
  }
  std::string reason;
  if (workers >= options_.max_workers) {
    settled_ = true;
    why = "at the most workers allowed (" + std::to_string(options_.max_workers) +
          format("; stall %.0f%%, %.0f samples/s)", stall * 100, rate) + ", settled";
    return Action::kSettle;
  }
  if (stall < options_.stall_threshold) {
    reason = format("trainer-bound (stall %.0f%%, %.0f samples/s)", stall * 100, rate);
  } else if (window.idle_cores < options_.idle_cores_threshold) {
    reason = format("stall %.0f%% but only %.1f idle cores (%.0f samples/s)",
                    stall * 100, window.idle_cores, rate);
  } else {
    rate_before_add_ = rate;
    warming_ = true;
    last_reason_.clear();
    why = std::to_string(workers) + " -> " + std::to_string(workers + 1) + " workers " +
          format("(stall %.0f%%, %.1f idle cores, %.0f samples/s)", stall * 100,
                 window.idle_cores, rate);
    return Action::kAdd;
  }
  // Keep: say so once per change of reason (the figures alone do not count).
  const std::string kind = reason.substr(0, reason.find(' '));
  if (kind != last_reason_) {
    last_reason_ = kind;
    why = "keeping " + std::to_string(workers) + " workers: " + reason;
  }
  return Action::kKeep;
}

IdleCores::IdleCores() {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  cores_ = cores > 0 ? static_cast<int>(cores) : 1;
  sample();
}

double IdleCores::sample() {
  std::ifstream stat("/proc/stat");
  std::string line, label;
  if (!std::getline(stat, line)) return 0;
  std::istringstream fields(line);
  fields >> label;
  uint64_t value = 0, idle = 0, total = 0;
  for (int i = 0; i < 8 && fields >> value; ++i) {
    total += value;
    if (i == 3 || i == 4) idle += value;  // idle, iowait
  }
  const uint64_t d_total = total - total_, d_idle = idle - idle_;
  total_ = total;
  idle_ = idle;
  if (d_total == 0) return 0;
  return cores_ * static_cast<double>(d_idle) / static_cast<double>(d_total);
}

WorkerAutotune::WorkerAutotune(AutotuneOptions options, std::function<void()> add_worker,
                               std::function<void()> retire_worker,
                               std::function<int()> workers)
    : policy_(options),
      add_worker_(std::move(add_worker)),
      retire_worker_(std::move(retire_worker)),
      workers_(std::move(workers)),
      options_(options) {
  start_window(0);
}

void WorkerAutotune::start_window(uint64_t trainer_wait_ns) {
  window_start_ns_ = ring::monotonic_ns();
  wait_at_start_ns_ = trainer_wait_ns;
  batches_ = samples_ = 0;
  idle_.sample();
}

void WorkerAutotune::on_batch(int64_t samples, uint64_t trainer_wait_ns) {
  ++total_batches_;
  if (policy_.settled()) return;
  ++batches_;
  samples_ += samples;
  const uint64_t now = ring::monotonic_ns();
  const double seconds = (now - window_start_ns_) * 1e-9;
  if (seconds < options_.window_s || batches_ < options_.window_batches) return;
  AutotuneWindow window;
  window.seconds = seconds;
  window.batches = batches_;
  window.samples = samples_;
  window.trainer_wait_s = (trainer_wait_ns - wait_at_start_ns_) * 1e-9;
  window.idle_cores = idle_.sample();
  std::string why;
  const int workers = workers_();
  AutotunePolicy::Action action = policy_.decide(window, workers, why);
  if (action == AutotunePolicy::Action::kAdd) add_worker_();
  if (action == AutotunePolicy::Action::kRetire) retire_worker_();
  if (!why.empty()) record(why);
  start_window(trainer_wait_ns);
}

void WorkerAutotune::record(const std::string& decision) {
  std::string text = "batch " + std::to_string(total_batches_) + ": " + decision;
  constexpr size_t kMaxDecisions = 64;
  if (decisions_.size() < kMaxDecisions) decisions_.push_back(text);
  std::string line = "ringloader: autotune: " + text + "\n";
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace ringloader::trainer
