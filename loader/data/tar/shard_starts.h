// SPDX-License-Identifier: BSD-3-Clause
// Where each tar shard's samples start in the dataset's numbering (shards
// in URL order, their samples concatenated), and the two names of a
// sample: its dataset index and its ShardSample (dataset.h). The tar
// reader, the worker's random keys and a Loader over shards indexed in the
// background all translate with this one table.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "ringloader/dataset.h"

namespace ringloader::data {

class ShardStarts {
 public:
  ShardStarts() = default;
  explicit ShardStarts(const std::vector<int64_t>& shard_sizes) : first_(shard_sizes.size() + 1) {
    std::partial_sum(shard_sizes.begin(), shard_sizes.end(), first_.begin() + 1);
  }
  bool empty() const { return first_.size() < 2; }
  size_t shards() const { return first_.empty() ? 0 : first_.size() - 1; }
  // Precondition: shard < shards() (first(shards()) is the total).
  int64_t first(size_t shard) const { return first_[shard]; }
  int64_t end(size_t shard) const { return first_[shard + 1]; }
  int64_t total() const { return first_.empty() ? 0 : first_.back(); }

  // The ShardSample name of dataset index `index` in [0, total()).
  int64_t shard_sample(int64_t index) const {
    const auto next = std::upper_bound(first_.begin(), first_.end(), index);
    const auto shard = static_cast<int64_t>(next - first_.begin()) - 1;
    return shard_sample_index({shard, index - first_[static_cast<size_t>(shard)]});
  }
  // The dataset index of `sample`, or nullopt when it names no sample
  // (a shard or ordinal past the end).
  std::optional<int64_t> index_of(ShardSample sample) const {
    if (sample.shard < 0 || static_cast<size_t>(sample.shard) >= shards()) return std::nullopt;
    const auto shard = static_cast<size_t>(sample.shard);
    if (sample.ordinal < 0 || sample.ordinal >= end(shard) - first(shard)) return std::nullopt;
    return first(shard) + sample.ordinal;
  }

 private:
  std::vector<int64_t> first_;  // shards() + 1 entries
};

}  // namespace ringloader::data
