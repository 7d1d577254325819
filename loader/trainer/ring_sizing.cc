// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/ring_sizing.h"

#include <unistd.h>

#include <algorithm>

namespace ringloader::trainer {
namespace {

uint64_t quarter_of_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return uint64_t{1} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4;
}

}  // namespace

int worker_capacity(const LoaderOptions& options) {
  if (options.num_workers != LoaderOptions::kAutoWorkers) {
    return std::max(1, options.num_workers);
  }
  if (options.max_auto_workers > 0) return options.max_auto_workers;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 ? static_cast<int>(cores) : 1;
}

}  // namespace ringloader::trainer

namespace ringloader {

int automatic_ring_slots(const LoaderOptions& options, uint64_t slot_bytes) {
  const int workers = options.num_workers == 0 ? 0 : trainer::worker_capacity(options);
  // Two slots per worker, the trainer's held batch among them: as deep as
  // torch's prefetch_factor=2, and docs/peers.md ("Ring depth") measures
  // what a deeper ring buys (<= 2.5% with a consumer at the workers' pace)
  // against what it costs (every slot stays resident).
  const int wanted = std::max(4, 2 * workers);
  const uint64_t budget = options.ring_memory_budget_bytes > 0
                              ? options.ring_memory_budget_bytes
                              : trainer::quarter_of_memory();
  const uint64_t fit = slot_bytes > 0 ? budget / slot_bytes : uint64_t(wanted);
  return static_cast<int>(std::max<uint64_t>(2, std::min<uint64_t>(wanted, fit)));
}

}  // namespace ringloader
