// SPDX-License-Identifier: BSD-3-Clause
// How many workers and ring slots a Loader gets when the options leave it
// to the Loader (num_workers = kAutoWorkers, ring_slots = 0).
#pragma once

#include <cstdint>

#include "ringloader/options.h"

namespace ringloader::trainer {

// The most workers the ring must have room for: num_workers, or for
// kAutoWorkers max_auto_workers (0: the online cores), at least 1.
int worker_capacity(const LoaderOptions& options);

// ring_slots = 0: max(4, 2 * capacity), lowered (to 2 at least) until
// slots x slot_bytes fits the budget (0: a quarter of physical memory).
int automatic_ring_slots(const LoaderOptions& options, uint64_t slot_bytes);

}  // namespace ringloader::trainer
