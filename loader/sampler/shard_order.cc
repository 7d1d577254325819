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
      rng_(seed, epoch, 0, kShuffleBufferStream) {}

void ShardShuffleStream::add_shard(int64_t first, int64_t count, std::vector<int64_t>& out) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t sample = first + i;
    if (static_cast<int64_t>(buffer_.size()) < capacity_) {
      buffer_.push_back(sample);
      continue;
    }
    // Full: emit a random resident and let the new sample take its place.
    const int64_t pick = rng_.integer(0, capacity_ - 1);
    out.push_back(buffer_[pick]);
    buffer_[pick] = sample;
  }
}

void ShardShuffleStream::finish(std::vector<int64_t>& out) {
  // A random order of what is left, so the epoch's tail is mixed too.
  for (int64_t i = static_cast<int64_t>(buffer_.size()) - 1; i > 0; --i) {
    std::swap(buffer_[i], buffer_[rng_.integer(0, i)]);
  }
  out.insert(out.end(), buffer_.begin(), buffer_.end());
  buffer_.clear();
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
