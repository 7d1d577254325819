// SPDX-License-Identifier: BSD-3-Clause
// Mid-epoch resume: the Loader's position as plain data, and a fresh
// Loader's way back to it. Only positions are saved, never bytes: every
// batch is a function of (seed, epoch, rank, world_size, dataset, order), so
// the remaining batches of an epoch are recomputed exactly. A state of
// another world size resumes elastically: the ranks split what the job left
// of the epoch (loader/sampler/elastic.h).
#include <algorithm>
#include <cstdio>

#include "loader/trainer/distributed.h"
#include "loader/trainer/loader_impl.h"

namespace ringloader {
namespace {

// FNV-1a, 64 bit: stable across processes and builds (std::hash is not).
uint64_t fnv1a(const void* data, size_t bytes, uint64_t hash = 14695981039346656037ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

uint64_t order_hash(const std::vector<int64_t>& order) {
  return fnv1a(order.data(), order.size() * sizeof(int64_t));
}

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::vector<sampler::ElasticStage> to_stages(const std::vector<ElasticStage>& stages) {
  std::vector<sampler::ElasticStage> out;
  for (const ElasticStage& stage : stages) out.push_back({stage.world_size, stage.batches});
  return out;
}

std::vector<ElasticStage> from_stages(const std::vector<sampler::ElasticStage>& stages) {
  std::vector<ElasticStage> out;
  for (const auto& stage : stages) out.push_back({stage.world_size, stage.batches});
  return out;
}

}  // namespace

std::vector<int64_t> rank_epoch_order(const sampler::Sampler& base, int64_t epoch,
                                      const std::vector<sampler::ElasticStage>& history,
                                      int64_t rank, int64_t world) {
  sampler::SamplerOptions options = base.options();
  options.rank = rank;
  options.world_size = world;
  const sampler::Sampler sampler(options);
  if (history.empty()) return sampler.order(static_cast<uint64_t>(epoch));
  std::vector<int64_t> global;
  sampler.global_order(static_cast<uint64_t>(epoch), global);
  return sampler::elastic_order(global, history, rank, world, sampler.layout(),
                                options.batch_size, options.drop_last);
}

std::vector<int64_t> epoch_order(int64_t dataset_size, const LoaderOptions& options,
                                 int64_t epoch, const std::vector<MixPart>& mix,
                                 const std::vector<ElasticStage>& history) {
  if (epoch < 0) throw OptionError("ringloader: epoch must be >= 0");
  const LoaderOptions resolved = trainer::resolve_distributed(options);
  sampler::SamplerOptions sampler_options =
      trainer::sampler_options(dataset_size, resolved);
  sampler_options.mix = trainer::mix_streams(mix, {});
  const sampler::Sampler sampler(sampler_options);
  return rank_epoch_order(sampler, epoch, to_stages(history), resolved.rank,
                          resolved.world_size);
}

std::string Loader::Impl::options_fingerprint() const {
  if (data_hash_.empty()) {
    // External (Python) workers ship an opaque dataset; their size is
    // checked on its own.
    if (external_) {
      data_hash_ = "external";
    } else {
      // Where tar shards are cached is not what they hold: a job may resume
      // with another cache folder, or none.
      nlohmann::json description = config_.dataset.to_json();
      description.erase("cache");
      description.erase("shard_bytes");
      description.erase("table");  // its /proc path; "digest" says what it holds
      const std::string text = description.dump() + "\n" + config_.pipeline.to_json().dump();
      data_hash_ = hex(fnv1a(text.data(), text.size()));
    }
  }
  return "batch_size=" + std::to_string(options_.batch_size) +
         " shuffle=" + std::to_string(options_.shuffle) +
         " drop_last=" + std::to_string(options_.drop_last) +
         " data=" + data_hash_;
}

LoaderState Loader::Impl::state_dict() const {
  if (!epoch_open_ && resume_) return *resume_;  // loaded, not yet started
  LoaderState state;
  state.seed = options_.seed;
  state.dataset_size = dataset_size_;
  state.rank = options_.rank;
  state.world_size = options_.world_size;
  state.options_fingerprint = options_fingerprint();
  if (!epoch_open_) {
    state.epoch = next_epoch_;
    state.batches_in_epoch = size();
    return state;
  }
  state.epoch = epoch_;
  // Staged device batches were taken from the ring but not handed out; a
  // batch put back was handed out and taken back.
  state.batches_consumed = cursor_ - static_cast<int64_t>(staged_.size()) -
                           (put_back_ ? 1 : 0);
  state.batches_in_epoch = batch_count_;
  if (order_is_custom_) state.order = order_;
  state.order_hash = order_hash(order_);
  state.elastic = from_stages(elastic_);
  return state;
}

void Loader::Impl::check_state_matches(const LoaderState& state) const {
  auto refuse = [](const std::string& what, const std::string& saved,
                   const std::string& here) {
    throw OptionError("ringloader: the loader state was saved with " + what + " " +
                      saved + ", this loader has " + here +
                      "; resume with the same configuration");
  };
  if (state.version != LoaderState::kVersion) {
    refuse("state version", std::to_string(state.version),
           std::to_string(LoaderState::kVersion));
  }
  if (state.seed != options_.seed) {
    refuse("seed", std::to_string(state.seed), std::to_string(options_.seed));
  }
  if (state.dataset_size != dataset_size_) {
    refuse("a dataset of", std::to_string(state.dataset_size) + " samples",
           std::to_string(dataset_size_));
  }
  const std::string here = options_fingerprint();
  if (state.options_fingerprint != here) {
    refuse("options", "'" + state.options_fingerprint + "'", "'" + here + "'");
  }
  if (state.epoch < 0 || state.batches_consumed < 0 ||
      state.batches_consumed > state.batches_in_epoch || state.world_size <= 0 ||
      state.rank < 0 || state.rank >= state.world_size ||
      (!state.rank_batches.empty() &&
       static_cast<int64_t>(state.rank_batches.size()) != state.world_size)) {
    throw OptionError("ringloader: loader state position (epoch " +
                      std::to_string(state.epoch) + ", batch " +
                      std::to_string(state.batches_consumed) + " of " +
                      std::to_string(state.batches_in_epoch) + ", rank " +
                      std::to_string(state.rank) + " of " +
                      std::to_string(state.world_size) + ") is impossible");
  }
}

void Loader::Impl::load_state_dict(const LoaderState& state) {
  check_state_matches(state);
  const bool custom = !state.order.empty();
  const bool same_world = state.world_size == options_.world_size;
  if (custom && !same_world) {
    throw OptionError("ringloader: the loader state was saved at world size " +
                      std::to_string(state.world_size) + " with an order from "
                      "set_order() (a caller's sampler); only the built-in sampler's "
                      "orders resume at another world size (here " +
                      std::to_string(options_.world_size) + ")");
  }
  if (custom && state.rank != options_.rank) {
    throw OptionError("ringloader: the loader state's order (set_order) is rank " +
                      std::to_string(state.rank) + "'s, this loader is rank " +
                      std::to_string(options_.rank));
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
                         : state.rank_batches[static_cast<size_t>(options_.rank)];
  } else if (!complete) {
    std::vector<int64_t> counts = state.rank_batches;
    if (counts.empty()) counts.assign(static_cast<size_t>(state.world_size), state.batches_consumed);
    // A stage where nothing was consumed leaves the epoch as it was: the
    // new world size's own order (rank_share of the same global order).
    if (std::any_of(counts.begin(), counts.end(), [](int64_t b) { return b > 0; })) {
      resume_history_.push_back({state.world_size, std::move(counts)});
    }
  }
  if (custom && !complete) set_order(state.order);  // validates the indices
  // An epoch seen to its end is done: the loader goes on with the next one
  // unless set_epoch() asks for that epoch again (then it yields nothing).
  next_epoch_ = complete ? state.epoch + 1 : state.epoch;
}

bool Loader::Impl::take_resume_order(std::vector<int64_t>& order) {
  if (!resume_ || resume_->epoch != epoch_ || resume_history_.empty()) return false;
  order = rank_epoch_order(sampler_, epoch_, resume_history_, options_.rank,
                           options_.world_size);
  elastic_ = resume_history_;
  return true;
}

int64_t Loader::Impl::take_resume_offset() {
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

}  // namespace ringloader
