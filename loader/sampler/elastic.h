// SPDX-License-Identifier: BSD-3-Clause
// Elastic resume: the order of an epoch interrupted at one world size and
// finished at another. Ranks run in lockstep, so what the job consumed is a
// pure function of the epoch's global order, the world size and the batches
// each rank took: no sample list has to be saved or exchanged.
#pragma once

#include <cstdint>
#include <vector>

namespace ringloader::sampler {

// One stretch of an epoch run at one world size: the batches each rank of
// it handed out (size world_size).
struct ElasticStage {
  int64_t world_size = 1;
  std::vector<int64_t> batches;
};

// How a list is split over ranks: every world-th entry (DistributedSampler)
// or one contiguous stretch per rank (sharded data: a rank reads a run).
enum class ShareLayout { kInterleaved, kContiguous };

// Positions [0, count) that rank `rank` of `world` takes: padded by
// wrapping to a multiple of `world` so every rank gets ceil(count / world)
// (with drop_last, cut to whole batches of batch_size).
std::vector<int64_t> rank_share(int64_t count, int64_t rank, int64_t world,
                                ShareLayout layout, int64_t batch_size,
                                bool drop_last);

// Positions [0, length) of the global order that no rank consumed in
// `stages` (each stage splits what the earlier ones left), in order.
// Throws OptionError for a stage whose counts are impossible.
std::vector<int64_t> remaining_positions(int64_t length,
                                         const std::vector<ElasticStage>& stages,
                                         ShareLayout layout, int64_t batch_size,
                                         bool drop_last);

// Rank `rank` of `world`'s order after `stages`: its share of what they
// left, as entries of `global` (the epoch's unsharded order).
std::vector<int64_t> elastic_order(const std::vector<int64_t>& global,
                                   const std::vector<ElasticStage>& stages,
                                   int64_t rank, int64_t world, ShareLayout layout,
                                   int64_t batch_size, bool drop_last);

}  // namespace ringloader::sampler
