// SPDX-License-Identifier: BSD-3-Clause
// Which samples go into each epoch, in which order. A pure function of
// (seed, epoch, rank, world_size, dataset size): never of workers or timing.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/sampler/elastic.h"
#include "loader/sampler/mix_order.h"

namespace ringloader::sampler {

struct SamplerOptions {
  int64_t dataset_size = 0;
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  uint64_t seed = 0;
  // DistributedSampler semantics: each rank takes every world_size-th index
  // of one shared permutation, padded by wrapping so ranks get equal counts.
  // Sharded datasets (shard_sizes set) give each rank a contiguous stretch
  // of the padded order instead, so ranks read disjoint runs of shards.
  int64_t rank = 0;
  int64_t world_size = 1;
  // Sharded datasets (tar): samples per shard, in index order. When set,
  // shuffling permutes shards and mixes samples through a buffer of
  // `shuffle_buffer` (see shard_order.h) instead of a full permutation.
  std::vector<int64_t> shard_sizes;
  int64_t shuffle_buffer = 0;
  // A weighted mix (mix_order.h): the dataset is the streams'
  // concatenation and each epoch draws sum(choose) samples from it. Empty:
  // every sample once per epoch.
  std::vector<MixStream> mix;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);

  // Samples of one epoch over all ranks, before padding: the dataset size,
  // or a mix's sum of `choose`.
  int64_t epoch_length() const;
  // How ranks split the epoch: contiguous stretches for sharded data.
  ShareLayout layout() const;
  // The epoch's order over all ranks, before sharding and padding.
  void global_order(uint64_t epoch, std::vector<int64_t>& out) const;
  // Samples this rank sees per epoch (after padding / drop_last trimming).
  const SamplerOptions& options() const { return options_; }
  int64_t samples_per_epoch() const;
  int64_t batches_per_epoch() const;
  // Dataset indices for `epoch`, in delivery order; batch j holds entries
  // [j * batch_size, min((j + 1) * batch_size, samples_per_epoch())).
  std::vector<int64_t> order(uint64_t epoch) const;
  // The same into `out`, reusing its capacity and `scratch`'s: a trainer
  // that calls this every epoch allocates nothing after the first.
  void order_into(uint64_t epoch, std::vector<int64_t>& out,
                  std::vector<int64_t>& scratch) const;

 private:
  SamplerOptions options_;
};

// A random permutation of [0, n) from the counter RNG keyed by (seed, epoch).
std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, uint64_t epoch);
void shuffle_indices(std::vector<int64_t>& indices, int64_t n, uint64_t seed,
                     uint64_t epoch);

}  // namespace ringloader::sampler
