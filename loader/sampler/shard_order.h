// SPDX-License-Identifier: BSD-3-Clause
// The epoch order of a sharded (tar) dataset: shards in an order permuted
// per (seed, epoch), their samples concatenated, then mixed by a bounded,
// seeded shuffle buffer (WebDataset's shuffle(n)). Consecutive batches thus
// come from one region of one or two shards, and reading stays sequential,
// while the order is still a pure function: every sample has a fixed place
// in it, so any batch (resume, any worker) can be rebuilt from the index.
#pragma once

#include <cstdint>
#include <vector>

namespace ringloader::sampler {

// A permutation of [0, sum(shard_sizes)); samples of shard s are the
// indices [sum(shard_sizes[0..s)), ... + shard_sizes[s]). A buffer of 0 or
// 1 keeps each shard's samples in archive order (shards still permuted).
void shard_shuffle_order(const std::vector<int64_t>& shard_sizes,
                         int64_t shuffle_buffer, uint64_t seed, uint64_t epoch,
                         std::vector<int64_t>& out);

}  // namespace ringloader::sampler
