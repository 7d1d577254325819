// SPDX-License-Identifier: BSD-3-Clause
// Fetches shards into the shard cache ahead of the epoch order, on
// prefetch_shards threads of the trainer (fetches overlap: an object
// store's latency is paid once per window, not once per shard), so that workers find the shards they are about to read
// already on local disk and the trainer never waits on a fetch in steady
// state. It only warms the cache: a worker that reaches a shard first
// fetches it itself (or waits for this thread's fetch of it, through the
// shard's lock), and a failed prefetch is left to the worker's own fetch,
// which retries and reports it.
//
// Thread-safety: start() / advance() from one thread (the Loader's);
// figures from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "loader/data/fetch/shard_cache.h"
#include "loader/data/tar/tar_index.h"

namespace ringloader::data {

class ShardPrefetcher {
 public:
  // `index` must outlive the prefetcher; its cache options say where and
  // how far ahead (prefetch_shards).
  explicit ShardPrefetcher(const TarIndex& index);
  ~ShardPrefetcher();
  ShardPrefetcher(const ShardPrefetcher&) = delete;
  ShardPrefetcher& operator=(const ShardPrefetcher&) = delete;

  // A new epoch reads `order` (dataset indices) from position `first`.
  void start(const std::vector<int64_t>& order, size_t first);
  // Reading has reached `position` of that order: keep prefetch_shards
  // shards beyond the one holding it fetched.
  void advance(size_t position);
  // Blocks until nothing within reach is left to fetch (tests, benches).
  void wait_idle();

  int64_t fetches() const { return cache_.fetches(); }
  uint64_t bytes_fetched() const { return cache_.bytes_fetched(); }

 private:
  void run();
  // The last entry of sequence_ within reach of position_ (+1), under mutex_.
  size_t reach() const;

  const TarIndex& index_;
  ShardCache cache_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::vector<int32_t> sequence_;   // shards in order of first use
  std::vector<size_t> first_use_;   // where each is first used in the order
  size_t position_ = 0;
  size_t next_ = 0;                 // next entry of sequence_ to fetch
  int busy_ = 0;                    // fetches in progress
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ringloader::data
