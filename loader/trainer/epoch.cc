// SPDX-License-Identifier: BSD-3-Clause
// Only positions are saved, never bytes: every batch is a function of (seed,
// epoch, rank, world_size, dataset, order), so the remaining batches of an
// epoch are recomputed exactly. A state of another world size resumes
// elastically: the ranks split what the job left of the epoch
// (loader/sampler/elastic.h).
#include "loader/trainer/epoch.h"

#include <algorithm>

#include "loader/trainer/epoch_order.h"
#include "ringloader/errors.h"

namespace ringloader::trainer {

uint64_t order_hash(const std::vector<int64_t>& order) {
  const auto* p = reinterpret_cast<const unsigned char*>(order.data());
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < order.size() * sizeof(int64_t); ++i) {
    hash ^= p[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

Epoch::Epoch(sampler::Sampler sampler, int64_t rank, int64_t world_size)
    : sampler_(std::move(sampler)),
      rank_(rank),
      world_size_(world_size),
      batch_size_(sampler_.options().batch_size) {}

int64_t Epoch::batches_for(size_t samples) const {
  const auto n = static_cast<int64_t>(samples);
  return sampler_.options().drop_last ? n / batch_size_
                                      : (n + batch_size_ - 1) / batch_size_;
}

int64_t Epoch::size() const {
  return pending_order_ ? batches_for(pending_order_->size())
                        : sampler_.batches_per_epoch();
}

void Epoch::set_epoch(int64_t epoch) {
  if (epoch < 0) throw OptionError("ringloader: epoch must be >= 0");
  next_epoch_ = epoch;
  if (resume_ && resume_->epoch != epoch) resume_.reset();  // another epoch
}

void Epoch::set_order(std::vector<int64_t> indices) { pending_order_ = std::move(indices); }

size_t Epoch::start() {
  epoch_ = next_epoch_++;
  order_is_custom_ = pending_order_.has_value();
  elastic_.clear();
  if (pending_order_) {
    order_ = std::move(*pending_order_);
    pending_order_.reset();
  } else if (!take_resume_order()) {
    sampler_.order_into(static_cast<uint64_t>(epoch_), order_, order_scratch_);
  }
  batch_count_ = batches_for(order_.size());
  offset_ = take_resume_offset();
  cursor_ = offset_;
  return std::min(order_.size(), static_cast<size_t>(offset_ * batch_size_));
}

void Epoch::start_growing() {
  epoch_ = next_epoch_++;
  order_is_custom_ = false;
  growing_ = true;
  elastic_.clear();
  order_.clear();
  batch_count_ = 0;
  offset_ = 0;
  cursor_ = 0;
}

void Epoch::end_growing() {
  growing_ = false;
  // The sampler's trim (Sampler::samples_per_epoch, one rank).
  if (sampler_.options().drop_last) {
    order_.resize(order_.size() / static_cast<size_t>(batch_size_) *
                  static_cast<size_t>(batch_size_));
  }
  batch_count_ = batches_for(order_.size());
}

void Epoch::opened(uint64_t first_batch) {
  first_batch_ = first_batch;
  open_ = true;
}

uint32_t Epoch::expected_samples() const {
  // The workers' rule too (BatchFiller::fill, WorkerEndpoint::next_task).
  const int64_t left = static_cast<int64_t>(order_.size()) - cursor_ * batch_size_;
  return static_cast<uint32_t>(std::clamp<int64_t>(left, 0, batch_size_));
}

void Epoch::fill_state(LoaderState& state, int64_t not_handed_out) const {
  if (!open_) {
    state.epoch = next_epoch_;
    state.batches_in_epoch = size();
    return;
  }
  state.epoch = epoch_;
  state.batches_consumed = cursor_ - not_handed_out;
  state.batches_in_epoch = batch_count_;
  if (order_is_custom_) state.order = order_;
  state.order_hash = order_hash(order_);
  if (growing_) {
    // Named by shard so far; the sampler (the full index's, set by the
    // Loader first) gives the same order by dataset index, which a resume
    // recomputes.
    std::vector<int64_t> full, scratch;
    sampler_.order_into(static_cast<uint64_t>(epoch_), full, scratch);
    state.batches_in_epoch = batches_for(full.size());
    state.order_hash = order_hash(full);
  }
  state.elastic = from_stages(elastic_);
}

void Epoch::load(const LoaderState& state,
                 const std::function<void(const std::vector<int64_t>&)>& check_order) {
  const bool custom = !state.order.empty();
  const bool same_world = state.world_size == world_size_;
  if (custom && !same_world) {
    throw OptionError("ringloader: the loader state was saved at world size " +
                      std::to_string(state.world_size) + " with an order from "
                      "set_order() (a caller's sampler); only the built-in sampler's "
                      "orders resume at another world size (here " +
                      std::to_string(world_size_) + ")");
  }
  if (custom && state.rank != rank_) {
    throw OptionError("ringloader: the loader state's order (set_order) is rank " +
                      std::to_string(state.rank) + "'s, this loader is rank " +
                      std::to_string(rank_));
  }
  const std::vector<sampler::ElasticStage> saved_history = to_stages(state.elastic);
  // The saver's own order: its length and hash say the sampler reproduces.
  const std::vector<int64_t> saved_order =
      custom ? state.order
             : rank_epoch_order(sampler_, state.epoch, saved_history, state.rank,
                                state.world_size);
  if (batches_for(saved_order.size()) != state.batches_in_epoch) {
    throw OptionError("ringloader: the loader state's epoch has " +
                      std::to_string(state.batches_in_epoch) +
                      " batches, this loader computes " +
                      std::to_string(batches_for(saved_order.size())) + " for rank " +
                      std::to_string(state.rank) + " of " +
                      std::to_string(state.world_size));
  }
  const bool complete = state.batches_consumed >= state.batches_in_epoch &&
                        std::all_of(state.rank_batches.begin(), state.rank_batches.end(),
                                    [&](int64_t b) { return b >= state.batches_in_epoch; });
  if (!complete && state.batches_consumed > 0 && order_hash(saved_order) != state.order_hash) {
    throw OptionError("ringloader: the loader state's epoch order differs from "
                      "the one this loader computes for epoch " +
                      std::to_string(state.epoch));
  }
  resume_ = state;
  resume_history_ = saved_history;
  resume_offset_ = 0;
  if (same_world) {
    // Each rank goes on from its own position (lockstep: the saver's, when
    // only one rank's state was given).
    resume_offset_ = state.rank_batches.empty()
                         ? state.batches_consumed
                         : state.rank_batches[static_cast<size_t>(rank_)];
  } else if (!complete) {
    std::vector<int64_t> counts = state.rank_batches;
    if (counts.empty()) counts.assign(static_cast<size_t>(state.world_size), state.batches_consumed);
    // A stage where nothing was consumed leaves the epoch as it was: the
    // new world size's own order (rank_share of the same global order).
    if (std::any_of(counts.begin(), counts.end(), [](int64_t b) { return b > 0; })) {
      resume_history_.push_back({state.world_size, std::move(counts)});
    }
  }
  if (custom && !complete) {
    check_order(state.order);
    set_order(state.order);
  }
  // An epoch seen to its end is done: the loader goes on with the next one
  // unless set_epoch() asks for that epoch again (then it yields nothing).
  next_epoch_ = complete ? state.epoch + 1 : state.epoch;
}

bool Epoch::take_resume_order() {
  if (!resume_ || resume_->epoch != epoch_ || resume_history_.empty()) return false;
  order_ = rank_epoch_order(sampler_, epoch_, resume_history_, rank_, world_size_);
  elastic_ = resume_history_;
  return true;
}

int64_t Epoch::take_resume_offset() {
  if (!resume_) return 0;
  const LoaderState state = std::move(*resume_);
  resume_.reset();
  resume_history_.clear();
  if (state.epoch != epoch_) return 0;
  const bool remaining = resume_offset_ < batch_count_;
  if (order_is_custom_ && remaining && resume_offset_ > 0 &&
      order_hash(order_) != state.order_hash) {
    // set_order() after load_state_dict() replaced the saved order.
    throw OptionError("ringloader: epoch " + std::to_string(epoch_) +
                      "'s order is not the one the loader state was saved with "
                      "(a sampler that cannot be reproduced?)");
  }
  return std::min(resume_offset_, batch_count_);
}

}  // namespace ringloader::trainer
