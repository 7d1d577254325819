// SPDX-License-Identifier: BSD-3-Clause
// Tar shards indexed in the background, `streams` at a time: each shard is
// walked once (local shards by their headers, pipe: shards by streaming
// them) and its samples recorded. A caller may use a shard's samples as
// soon as that shard is done (wait_for), before the others are, and may
// say which shards it needs first (prefer). index_tar_shards is a counter
// waited on to its end (finish).
//
// Threads: every method may be called from any thread; the counter's own
// threads only scan. The destructor stops the shards being read at their
// next member and starts no other.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "loader/data/fetch/shard_input.h"
#include "loader/data/tar/tar_index.h"

namespace ringloader::data {

class ShardCounter {
 public:
  // `index`: the shard list, shuffle buffer and cache to index (its
  // samples, sizes and table are filled here). `file_sizes`: also read each
  // shard to its end and record its bytes. Starts at once, in shard order.
  ShardCounter(TarIndex index, bool file_sizes, int streams);
  ~ShardCounter();
  ShardCounter(const ShardCounter&) = delete;
  ShardCounter& operator=(const ShardCounter&) = delete;

  size_t shard_count() const { return shards_.size(); }
  const std::vector<std::string>& urls() const { return urls_; }
  int64_t shuffle_buffer() const { return shuffle_buffer_; }
  // The cache the shards are indexed through (disabled: none).
  const ShardCacheOptions& cache() const { return cache_; }
  // Shards not yet started are started in this order from now on (shards
  // it leaves out keep their place after it). Indices outside the shard
  // list are ignored.
  void prefer(const std::vector<int64_t>& order);
  // Blocks until shard `shard` is indexed and returns its sample count.
  // Rethrows its error (IoError naming shard and member); OptionError for a
  // shard outside the list.
  int64_t wait_for(size_t shard);
  // Blocks until every shard is indexed; returns the whole index (its
  // table built) and, when asked at construction, each shard's bytes.
  // Rethrows the error of the lowest failing shard, or IoError when the
  // shards hold no sample. Once only, and not with index().
  TarIndex finish(std::vector<uint64_t>* file_sizes = nullptr);

  // Never blocks: shard `shard`'s sample count when it is indexed, else
  // nullopt; rethrows its error. (The shard must exist.)
  std::optional<int64_t> counted(size_t shard);
  // Never blocks: whether every shard is indexed (false for good once one
  // failed: the caller meets its error where it needs that shard).
  bool complete();
  // finish() once for every caller: blocks until the index is complete and
  // returns it, shared; rethrows finish()'s error on every call.
  const std::shared_ptr<const TarIndex>& index();

 private:
  enum class State : uint8_t { kPending, kRunning, kDone, kFailed };
  struct Shard {
    State state = State::kPending;
    TarSampleTableBuilder samples;
    uint64_t file_size = 0;
    std::exception_ptr error;
    PipeInput* pipe = nullptr;  // while a pipe: shard is read (abandon)
  };
  void work();
  bool take(size_t& shard);  // under mutex_
  void scan(size_t shard);

  std::vector<std::string> urls_;
  int64_t shuffle_buffer_;
  ShardCacheOptions cache_;
  TarIndex index_;
  std::unique_ptr<ShardCache> shard_cache_;
  bool file_sizes_;
  std::vector<Shard> shards_;
  std::vector<int64_t> counts_;  // samples per shard, once done
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<size_t> queue_;  // shards to start, in the order they start
  bool stopping_ = false;
  std::atomic<bool> abandon_{false};
  bool failed_ = false;
  std::vector<std::thread> threads_;
  size_t done_shards_ = 0;  // indexed without error
  std::mutex index_mutex_;      // index() callers, one finish()
  std::shared_ptr<const TarIndex> index_done_;
  std::exception_ptr index_error_;
};

}  // namespace ringloader::data
