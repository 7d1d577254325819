// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/streamed_order.h"

#include <numeric>
#include <optional>

#include "ringloader/dataset.h"
#include "ringloader/errors.h"

namespace ringloader::trainer {
namespace {

std::vector<int64_t> visit_order(size_t shards, bool shuffle, uint64_t seed, uint64_t epoch) {
  if (shuffle) return sampler::shard_visit_order(static_cast<int64_t>(shards), seed, epoch);
  std::vector<int64_t> order(shards);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

}  // namespace

// Without shuffling, a buffer of 0 passes samples through in order, as the
// sampler's unshuffled order does (Sampler::global_order).
StreamedOrder::StreamedOrder(std::shared_ptr<data::ShardCounter> counter, bool shuffle,
                             uint64_t seed, uint64_t epoch)
    : counter_(std::move(counter)),
      visit_(visit_order(counter_->shard_count(), shuffle, seed, epoch)),
      stream_(shuffle ? counter_->shuffle_buffer() : 0, seed, epoch) {
  counter_->prefer(visit_);
}

bool StreamedOrder::extend(std::vector<int64_t>& order, size_t min_size, bool wait) {
  while (!complete_) {
    if (next_ == visit_.size()) {
      stream_.finish(order);
      complete_ = true;
      break;
    }
    const auto shard = static_cast<size_t>(visit_[next_]);
    std::optional<int64_t> count;
    try {
      count = counter_->counted(shard);
    } catch (const std::exception&) {
      // A shard that failed is an error when the epoch needs it, not
      // before: the batches ahead of it are still handed out.
      if (!wait || order.size() >= min_size) break;
      throw;
    }
    if (!count) {
      if (!wait || order.size() >= min_size) break;
      count = counter_->wait_for(shard);
    }
    add(shard, *count, order);
    ++next_;
  }
  return complete_;
}

void StreamedOrder::add(size_t shard, int64_t count, std::vector<int64_t>& order) {
  if (count >= (int64_t{1} << 32)) {
    throw IoError("ringloader: shard " + counter_->urls()[shard] + " holds " +
                  std::to_string(count) + " samples; at most 2^32 - 1 can be read while "
                  "the shards are being indexed (index them first: index_in_background=false)");
  }
  stream_.add_shard(shard_sample_index({static_cast<int64_t>(shard), 0}), count, order);
}

}  // namespace ringloader::trainer
