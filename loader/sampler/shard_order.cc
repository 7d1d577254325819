// SPDX-License-Identifier: BSD-3-Clause
#include "loader/sampler/shard_order.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "ringloader/random.h"

namespace ringloader::sampler {
namespace {

// Streams apart from the plain sampler's ("SH") and the transforms' (0).
constexpr uint32_t kShardOrderStream = 0x5344u;   // "SD"
constexpr uint32_t kShuffleBufferStream = 0x5342u;  // "SB"

}  // namespace

void shard_shuffle_order(const std::vector<int64_t>& shard_sizes,
                         int64_t shuffle_buffer, uint64_t seed, uint64_t epoch,
                         std::vector<int64_t>& out) {
  const int64_t shards = static_cast<int64_t>(shard_sizes.size());
  std::vector<int64_t> first(shard_sizes.size());
  std::exclusive_scan(shard_sizes.begin(), shard_sizes.end(), first.begin(), int64_t{0});
  std::vector<int64_t> shard_order(shard_sizes.size());
  std::iota(shard_order.begin(), shard_order.end(), 0);
  SampleRng shard_rng(seed, epoch, 0, kShardOrderStream);
  for (int64_t i = shards - 1; i > 0; --i) {  // Fisher-Yates over shards
    std::swap(shard_order[i], shard_order[shard_rng.integer(0, i)]);
  }

  out.clear();
  const int64_t capacity = std::max<int64_t>(shuffle_buffer, 1);
  std::vector<int64_t> buffer;
  buffer.reserve(static_cast<size_t>(std::min<int64_t>(
      capacity, std::accumulate(shard_sizes.begin(), shard_sizes.end(), int64_t{0}))));
  SampleRng rng(seed, epoch, 0, kShuffleBufferStream);
  for (int64_t shard : shard_order) {
    for (int64_t i = 0; i < shard_sizes[shard]; ++i) {
      const int64_t sample = first[shard] + i;
      if (static_cast<int64_t>(buffer.size()) < capacity) {
        buffer.push_back(sample);
        continue;
      }
      // Full: emit a random resident and let the new sample take its place.
      int64_t pick = rng.integer(0, capacity - 1);
      out.push_back(buffer[pick]);
      buffer[pick] = sample;
    }
  }
  // Drain: a random order of what is left, so the epoch's tail is mixed too.
  for (int64_t i = static_cast<int64_t>(buffer.size()) - 1; i > 0; --i) {
    std::swap(buffer[i], buffer[rng.integer(0, i)]);
  }
  out.insert(out.end(), buffer.begin(), buffer.end());
}

}  // namespace ringloader::sampler
