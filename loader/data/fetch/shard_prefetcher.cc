// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/fetch/shard_prefetcher.h"

#include <unistd.h>

#include <algorithm>
#include <exception>

namespace ringloader::data {

ShardPrefetcher::ShardPrefetcher(const TarIndex& index)
    : index_(index), cache_(index.cache) {
  const int threads = std::max(1, index.cache.prefetch_shards);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

ShardPrefetcher::~ShardPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  // A fetch in progress ends first (bounded by its command and retries).
  for (std::thread& thread : threads_) thread.join();
}

void ShardPrefetcher::start(const std::vector<int64_t>& order, size_t first) {
  std::vector<char> seen(index_.shards.size(), 0);
  std::vector<int32_t> sequence;
  std::vector<size_t> first_use;
  for (size_t i = first; i < order.size(); ++i) {
    const int32_t shard = index_.table->shard(order[i]);  // checked against its shards
    if (seen[static_cast<size_t>(shard)]) continue;
    seen[static_cast<size_t>(shard)] = 1;
    sequence.push_back(shard);
    first_use.push_back(i);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sequence_ = std::move(sequence);
    first_use_ = std::move(first_use);
    position_ = first;
    next_ = 0;
  }
  wake_.notify_all();
}

void ShardPrefetcher::advance(size_t position) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (position <= position_) return;
    position_ = position;
  }
  wake_.notify_all();
}

size_t ShardPrefetcher::reach() const {
  // The entry holding position_ is the last one first used at or before it.
  auto after = std::upper_bound(first_use_.begin(), first_use_.end(), position_);
  size_t current = after == first_use_.begin() ? 0 : static_cast<size_t>(after - first_use_.begin()) - 1;
  return std::min(sequence_.size(),
                  current + 1 + static_cast<size_t>(index_.cache.prefetch_shards));
}

void ShardPrefetcher::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return stop_ || (busy_ == 0 && next_ >= reach()); });
}

void ShardPrefetcher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || next_ < reach(); });
    if (stop_) return;
    const int32_t shard = sequence_[next_++];
    ++busy_;
    lock.unlock();
    try {
      const std::string& url = index_.shards[static_cast<size_t>(shard)];
      if (cache_.caches(url)) {
        cache_.prefetch(url, index_.shard_bytes.empty()
                                 ? 0 : index_.shard_bytes[static_cast<size_t>(shard)]);
      }
    } catch (const std::exception&) {
      // Left to the worker that needs the shard: it retries and reports.
    }
    lock.lock();
    --busy_;
    idle_.notify_all();
  }
}

}  // namespace ringloader::data
