// SPDX-License-Identifier: BSD-3-Clause
// The Loader's self-sizing: the ring's depth from the batch bytes and a
// memory budget, the worker count by measurement (worker_autotune.h), and
// the shard prefetcher kept ahead of the batches being made.
#include <algorithm>

#include "loader/trainer/loader_impl.h"
#include "loader/trainer/ring_sizing.h"

namespace ringloader {

void Loader::Impl::size_ring() {
  if (options_.ring_slots != 0) return;
  const uint64_t slot_bytes =
      static_cast<uint64_t>(options_.batch_size) * (shape_.bytes() + 2 * sizeof(int64_t));
  options_.ring_slots = automatic_ring_slots(options_, slot_bytes);
}

void Loader::Impl::after_batch(const Batch& batch) {
  if (autotune_) {
    autotune_->on_batch(static_cast<int64_t>(batch.sample_indices.size()),
                        trainer_wait_ns_);
  }
  if (prefetcher_) {
    // Workers run up to ring_slots batches ahead of the trainer: the
    // prefetcher's distance counts from there.
    const auto ahead = static_cast<size_t>((epoch_.cursor() + options_.ring_slots) *
                                           options_.batch_size);
    prefetcher_->advance(std::min(ahead, epoch_.order().size()));
  }
}

void Loader::Impl::add_tuning_stats(LoaderStats& stats) const {
  for (uint32_t i = 0; i < ring_->geometry().worker_capacity; ++i) {
    const ring::WorkerControl& worker = ring_->worker(i);
    stats.shard_fetches +=
        static_cast<int64_t>(worker.shard_fetches.load(std::memory_order_relaxed));
    stats.shard_bytes_fetched += worker.shard_bytes_fetched.load(std::memory_order_relaxed);
  }
  if (prefetcher_) {
    stats.shard_fetches += prefetcher_->fetches();
    stats.shard_bytes_fetched += prefetcher_->bytes_fetched();
  }
  if (autotune_) stats.autotune_decisions = autotune_->decisions();
}

}  // namespace ringloader
