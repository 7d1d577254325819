// SPDX-License-Identifier: BSD-3-Clause
// How a node deals one epoch out to its lanes: the built-in sampler's order
// (one rank, the Loader's seed and shuffle), padded by wrapping around, or
// with drop_last cut, to whole rounds of `lanes` full batches; global batch
// g then belongs to lane g % lanes as its batch g / lanes of the epoch.
#pragma once

#include <cstdint>
#include <vector>

#include "ringloader/options.h"

namespace ringloader::node {

// Batches each lane gets per epoch. Throws OptionError when drop_last
// leaves none (fewer than lanes * batch_size samples).
int64_t batches_per_lane(int64_t dataset_size, const LoaderOptions& options, int lanes);

// The epoch's global order, batches_per_lane * lanes * batch_size indices.
std::vector<int64_t> node_epoch_order(int64_t dataset_size, const LoaderOptions& options,
                                      int lanes, int64_t epoch);

}  // namespace ringloader::node
