// SPDX-License-Identifier: BSD-3-Clause
// Epoch orders of the built-in sampler for any rank and world size, also
// after elastic stages (the public epoch_order() and the Loader's resume
// share it). No torch.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/sampler/elastic.h"
#include "loader/sampler/sampler.h"
#include "ringloader/epoch_order.h"

namespace ringloader::trainer {

// Rank `rank` of `world`'s order of `epoch` after elastic `history`, with
// `base`'s dataset, shuffle, seed and batching.
std::vector<int64_t> rank_epoch_order(const sampler::Sampler& base, int64_t epoch,
                                      const std::vector<sampler::ElasticStage>& history,
                                      int64_t rank, int64_t world);

// Public ElasticStage <-> the sampler's.
std::vector<sampler::ElasticStage> to_stages(const std::vector<ElasticStage>& stages);
std::vector<ElasticStage> from_stages(const std::vector<sampler::ElasticStage>& stages);

}  // namespace ringloader::trainer
