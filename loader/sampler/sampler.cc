// SPDX-License-Identifier: BSD-3-Clause
#include "loader/sampler/sampler.h"

#include <numeric>
#include <utility>

#include "loader/sampler/shard_order.h"
#include "ringloader/errors.h"
#include "ringloader/random.h"

namespace ringloader::sampler {
namespace {

// Separates the shuffle's random stream from per-sample augmentation streams
// that share (seed, epoch, index = 0).
constexpr uint32_t kShuffleStream = 0x5348u;  // "SH"

}  // namespace

void shuffle_indices(std::vector<int64_t>& indices, int64_t n, uint64_t seed,
                     uint64_t epoch) {
  indices.resize(static_cast<size_t>(n));
  std::iota(indices.begin(), indices.end(), 0);
  SampleRng rng(seed, epoch, 0, kShuffleStream);
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(indices[i], indices[rng.integer(0, i)]);
  }
}

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> indices;
  shuffle_indices(indices, n, seed, epoch);
  return indices;
}

Sampler::Sampler(const SamplerOptions& options) : options_(options) {
  if (options.batch_size <= 0) {
    throw OptionError("ringloader: batch_size must be positive, got " +
                      std::to_string(options.batch_size));
  }
  if (options.world_size <= 0 || options.rank < 0 ||
      options.rank >= options.world_size) {
    throw OptionError("ringloader: rank " + std::to_string(options.rank) +
                      " is not in [0, world_size " +
                      std::to_string(options.world_size) + ")");
  }
  if (options.dataset_size <= 0) throw IoError("ringloader: the dataset is empty");
}

int64_t Sampler::epoch_length() const {
  return options_.mix.empty() ? options_.dataset_size : mix_length(options_.mix);
}

ShareLayout Sampler::layout() const {
  bool sharded = !options_.shard_sizes.empty();
  for (const MixStream& stream : options_.mix) sharded |= !stream.shard_sizes.empty();
  return sharded ? ShareLayout::kContiguous : ShareLayout::kInterleaved;
}

int64_t Sampler::samples_per_epoch() const {
  const int64_t n = epoch_length();
  const int64_t world = options_.world_size;
  int64_t per_rank = (n + world - 1) / world;  // padded like DistributedSampler
  if (options_.drop_last) {
    per_rank = per_rank / options_.batch_size * options_.batch_size;
  }
  return per_rank;
}

int64_t Sampler::batches_per_epoch() const {
  return (samples_per_epoch() + options_.batch_size - 1) / options_.batch_size;
}

void Sampler::global_order(uint64_t epoch, std::vector<int64_t>& out) const {
  if (!options_.mix.empty()) {
    mix_order(options_.mix, options_.shuffle, options_.shuffle_buffer, options_.seed,
              epoch, out);
    return;
  }
  if (options_.shuffle && !options_.shard_sizes.empty()) {
    shard_shuffle_order(options_.shard_sizes, options_.shuffle_buffer,
                        options_.seed, epoch, out);
    return;
  }
  if (options_.shuffle) {
    shuffle_indices(out, options_.dataset_size, options_.seed, epoch);
    return;
  }
  out.resize(static_cast<size_t>(options_.dataset_size));
  std::iota(out.begin(), out.end(), 0);
}

std::vector<int64_t> Sampler::order(uint64_t epoch) const {
  std::vector<int64_t> out, scratch;
  order_into(epoch, out, scratch);
  return out;
}

void Sampler::order_into(uint64_t epoch, std::vector<int64_t>& out,
                         std::vector<int64_t>& scratch) const {
  global_order(epoch, scratch);
  const int64_t world = options_.world_size;
  const int64_t length = epoch_length();
  const int64_t padded = (length + world - 1) / world * world;
  out.clear();
  if (layout() == ShareLayout::kContiguous) {
    // Sharded data: each rank takes one contiguous stretch of the order, so
    // a rank reads about 1/world of the shards instead of a slice of each.
    const int64_t per_rank = padded / world;
    for (int64_t i = options_.rank * per_rank; i < (options_.rank + 1) * per_rank; ++i) {
      out.push_back(scratch[static_cast<size_t>(i % length)]);
    }
  } else {
    for (int64_t i = options_.rank; i < padded; i += world) {
      out.push_back(scratch[static_cast<size_t>(i % length)]);
    }
  }
  out.resize(static_cast<size_t>(samples_per_epoch()));
}

}  // namespace ringloader::sampler
