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

// The automatic ring_slots is public: ringloader::automatic_ring_slots
// (options.h), defined in ring_sizing.cc.

}  // namespace ringloader::trainer
