// SPDX-License-Identifier: BSD-3-Clause
// The epoch order of a sharded (tar) dataset: shards in an order permuted
// per (seed, epoch), their samples concatenated, then mixed by a bounded,
// seeded shuffle buffer (WebDataset's shuffle(n), which starts letting
// samples out once kShuffleInitial are in and grows to n meanwhile). Consecutive batches thus
// come from one region of one or two shards, and reading stays sequential,
// while the order is still a pure function: every sample has a fixed place
// in it, so any batch (resume, any worker) can be rebuilt from the index.
#pragma once

#include <cstdint>
#include <vector>

#include "ringloader/random.h"

namespace ringloader::sampler {

// Samples the buffer holds before it lets the first one out (WebDataset's
// shuffle(n, initial=100)): the first batch waits for these, not for n.
constexpr int64_t kShuffleInitial = 100;

// A permutation of [0, sum(shard_sizes)); samples of shard s are the
// indices [sum(shard_sizes[0..s)), ... + shard_sizes[s]). A buffer of 0 or
// 1 keeps each shard's samples in archive order (shards still permuted).
void shard_shuffle_order(const std::vector<int64_t>& shard_sizes,
                         int64_t shuffle_buffer, uint64_t seed, uint64_t epoch,
                         std::vector<int64_t>& out);

// The shards' visit order of shard_shuffle_order: a permutation of
// [0, shard_count) that needs no shard's size.
std::vector<int64_t> shard_visit_order(int64_t shard_count, uint64_t seed, uint64_t epoch);

// shard_shuffle_order one shard at a time, in visit order: what it emits
// after the shards given so far is a prefix of the whole order, because the
// buffer's draws depend only on the samples already in it. So an order can
// start before later shards' sizes are known. A sample is any value: the
// caller picks how samples are named (dataset indices, or (shard, ordinal)).
class ShardShuffleStream {
 public:
  ShardShuffleStream(int64_t shuffle_buffer, uint64_t seed, uint64_t epoch);
  // Feeds the next visited shard, whose samples are first, first + 1, ...,
  // first + count - 1; appends the samples the buffer lets go to `out`.
  void add_shard(int64_t first, int64_t count, std::vector<int64_t>& out);
  // After the last shard: appends what the buffer still holds, mixed.
  void finish(std::vector<int64_t>& out);

 private:
  void add(int64_t sample, std::vector<int64_t>& out);
  void emit_one(std::vector<int64_t>& out);  // a random resident leaves

  int64_t capacity_;
  int64_t initial_;
  bool second_pending_ = false;  // growing: a step takes two samples
  std::vector<int64_t> buffer_;
  SampleRng rng_;
};

}  // namespace ringloader::sampler
