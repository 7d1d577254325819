// SPDX-License-Identifier: BSD-3-Clause
// Loader::Impl over tar shards still being indexed in the background
// (TarShardOptions::index_in_background; docs/tar_shards.md, "Indexing
// while reading"). The loader starts with no dataset size: its first epoch
// grows as shards are indexed (streamed_order.h), and it adopts the index
// (size, sampler, shard starts) as soon as something needs it whole.
#include "loader/trainer/distributed.h"
#include "loader/trainer/loader_impl.h"
#include "ringloader/errors.h"

namespace ringloader {

// Streaming needs a plain one-rank epoch: ranks split an order they cannot
// know before every count, and a substitute for a bad sample (on_error =
// skip) is drawn from the whole dataset.
std::shared_ptr<data::ShardCounter> Loader::Impl::index_to_stream(const Dataset& dataset,
                                                                  const LoaderOptions& options) {
  if (options.world_size != 1 || options.on_error != OnError::kRaise) return nullptr;
  return dataset.background_index();
}

sampler::Sampler Loader::Impl::first_sampler(const Dataset& dataset, bool streaming,
                                             const LoaderOptions& options) {
  if (!streaming) {
    sampler::SamplerOptions out = trainer::sampler_options(dataset.size(), options);
    out.shard_sizes = dataset.shard_sizes();
    out.shuffle_buffer = dataset.shuffle_buffer();
    out.mix = trainer::mix_streams(dataset.mix_parts(), out.shard_sizes);
    return sampler::Sampler(out);
  }
  // A placeholder until adopt_index(): nothing reads it before then.
  return sampler::Sampler(trainer::sampler_options(1, options));
}

void Loader::Impl::adopt_index() {
  if (!counter_) return;
  const data::TarIndex& index = *counter_->index();  // waits
  counter_.reset();
  shard_starts_ = data::ShardStarts(index.shard_sizes);
  dataset_size_ = index.size();
  epoch_.set_sampler(first_sampler(source_, false, options_));
  // An epoch read meanwhile names its samples by dataset index from now on
  // (state_dict hashes its order; resumes compare it with the sampler's).
  by_index_from(epoch_.mutable_order(), 0);
}

void Loader::Impl::by_index_from(std::vector<int64_t>& order, size_t from) const {
  for (size_t i = from; i < order.size(); ++i) {
    // The trainer's own order names only samples of counted shards.
    if (is_shard_sample(order[i])) order[i] = *shard_starts_.index_of(shard_sample_of(order[i]));
  }
}

void Loader::Impl::start_streamed_epoch() {
  epoch_.start_growing();
  streamed_ = std::make_unique<trainer::StreamedOrder>(
      counter_, options_.shuffle, options_.seed, static_cast<uint64_t>(epoch_.epoch()));
  // The first window (or, with nothing indexed yet, the first batch).
  plan_.batches = 0;
  plan_.samples = 0;
  grow_epoch(0, window_batches());
}

void Loader::Impl::grow_epoch(uint64_t plan_cursor, uint64_t window) {
  const uint64_t batch_size = ring_->geometry().batch_size;
  std::vector<int64_t>& order = epoch_.mutable_order();
  const size_t before = order.size();
  // What is indexed already, up to a window ahead; then, only if the
  // cursor's own batch is not in the order yet, wait for more shards.
  bool complete = streamed_->extend(order, (plan_cursor + window) * batch_size, false);
  if (!complete && order.size() < (plan_cursor + 1) * batch_size) {
    complete = streamed_->extend(order, (plan_cursor + 1) * batch_size, true);
  }
  if (counter_ && counter_->complete()) adopt_index();
  if (!shard_starts_.empty()) by_index_from(order, before);
  if (complete) {
    epoch_.end_growing();
    streamed_.reset();
  } else {
    epoch_.grew();
  }
  plan_.batches = static_cast<uint64_t>(epoch_.batch_count());
  plan_.samples = order.size();
}

// Workers of a shard-named loader read ShardSamples only.
int64_t Loader::Impl::order_entry(int64_t sample) const {
  if (!shard_named_ || is_shard_sample(sample)) return sample;
  // A dataset index (epochs after the index arrived, set_order, resume).
  return shard_starts_.shard_sample(sample);
}

// Dataset indices as soon as every shard is counted (the slot's names were
// checked against the shard count, read_ready_slot).
void Loader::Impl::name_by_index(std::vector<int64_t>& indices) {
  if (counter_ && counter_->complete()) adopt_index();
  if (shard_starts_.empty()) return;
  // Checked here, unlike by_index_from's: a worker wrote these.
  for (int64_t& index : indices) {
    if (!is_shard_sample(index)) continue;
    const ShardSample sample = shard_sample_of(index);
    const std::optional<int64_t> named = shard_starts_.index_of(sample);
    if (!named) {
      const auto shard = static_cast<size_t>(sample.shard);
      throw WorkerError("ringloader: " + where() + ": a worker read sample " +
                        std::to_string(sample.ordinal) + " of shard " +
                        config_.dataset.tar_index()->shards[shard] + ", which holds " +
                        std::to_string(shard_starts_.end(shard) - shard_starts_.first(shard)));
    }
    index = *named;
  }
}

}  // namespace ringloader
