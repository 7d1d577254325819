// SPDX-License-Identifier: BSD-3-Clause
// The built-in sampler's epoch order as a free function, for callers that
// iterate a dataset themselves (and the node, which deals it to lanes).
// No torch: pure arithmetic on (options, epoch, dataset size).
#pragma once

#include <cstdint>
#include <vector>

#include "ringloader/dataset.h"
#include "ringloader/export.h"
#include "ringloader/options.h"

namespace ringloader {

// One stretch of an epoch run at one world size, in an elastic resume: the
// batches each of its ranks handed out (batches.size() == world_size).
struct RINGLOADER_EXPORT ElasticStage {
  int64_t world_size = 1;
  std::vector<int64_t> batches;
};

// The built-in sampler's order for `epoch` on this rank: the dataset indices
// a Loader with these options (shuffle, drop_last, seed, rank, world_size,
// batch_size) iterates, for callers that iterate a dataset themselves.
RINGLOADER_EXPORT
std::vector<int64_t> epoch_order(int64_t dataset_size, const LoaderOptions& options,
                                 int64_t epoch);
// The same for a mix (Dataset::mix_parts(), shards 0) and after elastic
// stages of the epoch (LoaderState::elastic plus the saved stage).
RINGLOADER_EXPORT
std::vector<int64_t> epoch_order(int64_t dataset_size, const LoaderOptions& options,
                                 int64_t epoch, const std::vector<MixPart>& mix,
                                 const std::vector<ElasticStage>& history);

}  // namespace ringloader
