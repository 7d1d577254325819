// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar/shard_counter.h"

#include <algorithm>
#include <utility>

#include "loader/data/fetch/shard_input.h"
#include "loader/data/tar/tar_grouper.h"
#include "loader/data/tar/tar_walk.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

// Unwinds a shard's walk when the counter is destroyed mid-shard.
struct Abandoned {};

}  // namespace

// Up to `streams` shards at once: a pipe: shard is a download that is
// usually limited per connection (and a local one a chain of seeks), so one
// at a time leaves the link idle.
ShardCounter::ShardCounter(TarIndex index, bool file_sizes, int streams)
    : urls_(index.shards),
      shuffle_buffer_(index.shuffle_buffer),
      cache_(index.cache),
      index_(std::move(index)),
      file_sizes_(file_sizes),
      shards_(index_.shards.size()) {
  if (streams < 1) {
    throw OptionError("ringloader: index_streams must be >= 1, got " + std::to_string(streams));
  }
  counts_.assign(shards_.size(), 0);
  index_.shard_bytes.assign(shards_.size(), 0);
  if (index_.cache.enabled()) shard_cache_ = std::make_unique<ShardCache>(index_.cache);
  for (size_t shard = 0; shard < shards_.size(); ++shard) queue_.push_back(shard);
  const size_t threads = std::min<size_t>(static_cast<size_t>(streams), shards_.size());
  try {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  } catch (...) {  // no thread to be had: the ones started go on
    if (threads_.empty()) throw;
  }
}

ShardCounter::~ShardCounter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  // Shards being read stop at their next member (scan()), or at once when
  // a command keeps them waiting.
  abandon_.store(true, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Shard& shard : shards_) {
      if (shard.pipe) shard.pipe->abandon();
    }
  }
  // Fetches into a cache run their commands inside it.
  if (shard_cache_) shard_cache_->abandon();
  for (std::thread& thread : threads_) thread.join();
}

void ShardCounter::prefer(const std::vector<int64_t>& order) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<bool> moved(shards_.size());
  std::deque<size_t> queue;
  for (int64_t shard : order) {
    if (shard < 0 || static_cast<size_t>(shard) >= shards_.size()) continue;
    const auto s = static_cast<size_t>(shard);
    if (moved[s] || shards_[s].state != State::kPending) continue;
    moved[s] = true;
    queue.push_back(s);
  }
  for (size_t shard : queue_) {
    if (!moved[shard]) queue.push_back(shard);
  }
  queue_ = std::move(queue);
}

bool ShardCounter::take(size_t& shard) {
  // After a failure nothing new starts: finish() reports the lowest failing
  // shard, and every shard started before it has its own outcome.
  if (stopping_ || failed_ || queue_.empty()) return false;
  shard = queue_.front();
  queue_.pop_front();
  shards_[shard].state = State::kRunning;
  return true;
}

void ShardCounter::work() {
  for (;;) {
    size_t shard = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!take(shard)) return;
    }
    scan(shard);
  }
}

// Writes only its own shard's entries; wait_for and finish read them after
// the state, set under the mutex, says done.
void ShardCounter::scan(size_t shard) {
  Shard& out = shards_[shard];
  const std::string& url = index_.shards[shard];
  std::exception_ptr error;
  int64_t count = 0;
  // Outlives `out.pipe` (cleared below, under the lock abandon() takes).
  std::shared_ptr<ShardInput> input;
  try {
    if (shard_cache_ && shard_cache_->caches(url)) {
      auto copy = shard_cache_->open(url, 0);
      index_.shard_bytes[shard] = copy->size();
      input = std::move(copy);
    } else {
      input = open_shard(url);
      std::lock_guard<std::mutex> lock(mutex_);
      out.pipe = dynamic_cast<PipeInput*>(input.get());
      if (out.pipe && abandon_.load(std::memory_order_relaxed)) out.pipe->abandon();
    }
    TarSampleGrouper grouper(url, static_cast<int32_t>(shard));
    GroupedSample done;
    walk_tar(*input, url, TarSampleGrouper::is_label, [&](TarMember&& member) {
      // Relaxed: a flag, nothing is published with it.
      if (abandon_.load(std::memory_order_relaxed)) throw Abandoned();
      if (grouper.add(std::move(member), done)) {
        out.samples.add(done.sample);
        ++count;
      }
    });
    if (grouper.finish(done)) {
      out.samples.add(done.sample);
      ++count;
    }
    if (file_sizes_) {
      input->skip(UINT64_MAX);
      out.file_size = input->position();
    }
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out.pipe = nullptr;  // `input` goes with this scope: never abandoned after
    counts_[shard] = count;
    out.error = error;
    out.state = error ? State::kFailed : State::kDone;
    if (error) failed_ = true;
    if (!error) ++done_shards_;
  }
  changed_.notify_all();
}

int64_t ShardCounter::wait_for(size_t shard) {
  if (shard >= shards_.size()) {
    throw OptionError("ringloader: shard " + std::to_string(shard) + " of " +
                      std::to_string(shards_.size()) + " does not exist");
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (shards_[shard].state == State::kPending && !queue_.empty()) {
    // Wanted now: started next, so a wait never queues behind every shard.
    queue_.erase(std::find(queue_.begin(), queue_.end(), shard));
    queue_.push_front(shard);
  }
  changed_.wait(lock, [&] {
    const State state = shards_[shard].state;
    return state == State::kDone || state == State::kFailed ||
           (state == State::kPending && failed_);
  });
  if (shards_[shard].error) std::rethrow_exception(shards_[shard].error);
  if (shards_[shard].state != State::kDone) {
    // Never started: another shard failed first. Its error is the one.
    for (const Shard& other : shards_) {
      if (other.error) std::rethrow_exception(other.error);
    }
  }
  return counts_[shard];
}

TarIndex ShardCounter::finish(std::vector<uint64_t>* file_sizes) {
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  // Shards are started in order unless prefer() or wait_for() moved some,
  // so every shard below a failed one was started too: the lowest error is
  // the one a one-at-a-time pass would have met first.
  for (const Shard& shard : shards_) {
    if (shard.error) std::rethrow_exception(shard.error);
  }
  index_.shard_sizes = counts_;
  TarSampleTableBuilder samples;
  for (Shard& shard : shards_) {
    samples.append(std::move(shard.samples));
    if (file_sizes) file_sizes->push_back(shard.file_size);
  }
  if (samples.size() == 0) {
    throw IoError("ringloader: the tar shards hold no sample (first shard: " +
                  index_.shards.front() + ")");
  }
  index_.table = TarSampleTable::build(std::move(samples), index_.shards.size());
  return std::move(index_);
}

std::optional<int64_t> ShardCounter::counted(size_t shard) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Shard& entry = shards_.at(shard);
  if (entry.error) std::rethrow_exception(entry.error);
  if (entry.state != State::kDone) return std::nullopt;
  return counts_[shard];
}

bool ShardCounter::complete() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_shards_ == shards_.size();
}

const std::shared_ptr<const TarIndex>& ShardCounter::index() {
  std::lock_guard<std::mutex> lock(index_mutex_);
  if (!index_done_ && !index_error_) {
    try {
      index_done_ = std::make_shared<const TarIndex>(finish());
    } catch (...) {
      index_error_ = std::current_exception();
    }
  }
  if (index_error_) std::rethrow_exception(index_error_);
  return index_done_;
}

}  // namespace ringloader::data
