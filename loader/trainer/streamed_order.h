// SPDX-License-Identifier: BSD-3-Clause
// The order of an epoch whose tar shards are still being indexed in the
// background (TarShardOptions::index_in_background). The sampler's shard
// order needs only the shard count, and its shuffle buffer emits a prefix
// of the whole order per shard given (shard_order.h). So the epoch takes
// its shards in that order as each is indexed: the first batch waits for
// one shard, and the epoch is the one the full index gives, batch for
// batch. Samples are named by shard (ShardSample, dataset.h): a dataset
// index needs every shard before it counted, which may come much later.
//
// Threads: the trainer's only; the counter has threads of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "loader/data/tar/shard_counter.h"
#include "loader/sampler/shard_order.h"

namespace ringloader::trainer {

class StreamedOrder {
 public:
  // The order of `epoch` (shards permuted and mixed through the buffer when
  // `shuffle`, else in URL order). Asks the counter to index its shards in
  // that order.
  StreamedOrder(std::shared_ptr<data::ShardCounter> counter, bool shuffle, uint64_t seed,
                uint64_t epoch);

  // Appends the samples of the next shards in the order that are indexed.
  // With `wait`, also waits for shards until `order` holds `min_size`
  // samples or is complete. Returns whether the order is complete (every
  // shard given, the buffer drained). Rethrows a shard's IoError only when
  // waiting for samples that shard holds: the ones before it are all in
  // `order` by then.
  bool extend(std::vector<int64_t>& order, size_t min_size, bool wait);

 private:
  void add(size_t shard, int64_t count, std::vector<int64_t>& order);

  std::shared_ptr<data::ShardCounter> counter_;
  std::vector<int64_t> visit_;
  size_t next_ = 0;  // in visit_
  sampler::ShardShuffleStream stream_;
  bool complete_ = false;
};

}  // namespace ringloader::trainer
