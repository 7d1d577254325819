// SPDX-License-Identifier: BSD-3-Clause
#include "loader/sampler/shard_order.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace ringloader::sampler {
namespace {

// Streams apart from the plain sampler's ("SH") and the transforms' (0).
constexpr uint32_t kShardOrderStream = 0x5344u;   // "SD"
constexpr uint32_t kShuffleBufferStream = 0x5342u;  // "SB"

}  // namespace

std::vector<int64_t> shard_visit_order(int64_t shard_count, uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(shard_count));
  std::iota(order.begin(), order.end(), 0);
  SampleRng rng(seed, epoch, 0, kShardOrderStream);
  for (int64_t i = shard_count - 1; i > 0; --i) {  // Fisher-Yates over shards
    std::swap(order[i], order[rng.integer(0, i)]);
  }
  return order;
}

ShardShuffleStream::ShardShuffleStream(int64_t shuffle_buffer, uint64_t seed, uint64_t epoch)
    : capacity_(std::max<int64_t>(shuffle_buffer, 1)),
      initial_(std::min(capacity_, kShuffleInitial)),
      rng_(seed, epoch, 0, kShuffleBufferStream) {}

void ShardShuffleStream::add_shard(int64_t first, int64_t count, std::vector<int64_t>& out) {
  for (int64_t i = 0; i < count; ++i) add(first + i, out);
}

// WebDataset's shuffle(n, initial): nothing leaves before `initial` samples
// are in; then, while the buffer is below capacity, it takes two samples
// per one it lets out (so it grows to capacity), and once full one for one.
// The first batch thus waits for ~initial samples, not for the whole buffer.
void ShardShuffleStream::add(int64_t sample, std::vector<int64_t>& out) {
  buffer_.push_back(sample);
  if (second_pending_) {
    second_pending_ = false;
  } else if (static_cast<int64_t>(buffer_.size()) < capacity_) {
    second_pending_ = true;  // this step takes the next sample too
    return;
  }
  if (static_cast<int64_t>(buffer_.size()) >= initial_) emit_one(out);
}

void ShardShuffleStream::emit_one(std::vector<int64_t>& out) {
  const int64_t last = static_cast<int64_t>(buffer_.size()) - 1;
  std::swap(buffer_[static_cast<size_t>(rng_.integer(0, last))], buffer_.back());
  out.push_back(buffer_.back());
  buffer_.pop_back();
}

void ShardShuffleStream::finish(std::vector<int64_t>& out) {
  // A step cut short by the end still lets its sample out, as WebDataset's.
  if (second_pending_ && static_cast<int64_t>(buffer_.size()) >= initial_) emit_one(out);
  second_pending_ = false;
  // A random order of what is left, so the epoch's tail is mixed too.
  while (!buffer_.empty()) emit_one(out);
}

void shard_shuffle_order(const std::vector<int64_t>& shard_sizes,
                         int64_t shuffle_buffer, uint64_t seed, uint64_t epoch,
                         std::vector<int64_t>& out) {
  std::vector<int64_t> first(shard_sizes.size());
  std::exclusive_scan(shard_sizes.begin(), shard_sizes.end(), first.begin(), int64_t{0});
  out.clear();
  ShardShuffleStream stream(shuffle_buffer, seed, epoch);
  for (int64_t shard : shard_visit_order(static_cast<int64_t>(shard_sizes.size()), seed, epoch)) {
    stream.add_shard(first[shard], shard_sizes[shard], out);
  }
  stream.finish(out);
}

}  // namespace ringloader::sampler
