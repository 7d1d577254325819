// SPDX-License-Identifier: BSD-3-Clause
// Mid-epoch resume, the Loader's side: the configuration a state belongs to
// (seed, dataset, options' fingerprint) and its checks. The position itself
// (epoch, batches consumed, order, elastic history) is the Epoch's
// (epoch.cc).
#include <algorithm>
#include <cstdio>

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

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

std::string Loader::Impl::options_fingerprint() const {
  if (data_hash_.empty()) {
    // External (Python) workers ship an opaque dataset; their size is
    // checked on its own.
    if (external_) {
      data_hash_ = "external";
    } else {
      // Where tar shards are cached is not what they hold: a job may resume
      // with another cache folder, or none; nor is which shard index file
      // (if any) their index was read from.
      nlohmann::json description = source().to_json();
      description.erase("cache");
      description.erase("shard_bytes");
      description.erase("manifest");
      description.erase("table");  // its /proc path; "digest" says what it holds
      description.erase("rows");   // the same for tensor rows
      const std::string text = description.dump() + "\n" + config_.pipeline.to_json().dump();
      data_hash_ = hex(fnv1a(text.data(), text.size()));
    }
  }
  return "batch_size=" + std::to_string(options_.batch_size) +
         " shuffle=" + std::to_string(options_.shuffle) +
         " drop_last=" + std::to_string(options_.drop_last) +
         " data=" + data_hash_;
}

LoaderState Loader::Impl::state_dict() {
  if (!epoch_.open() && epoch_.loaded()) return *epoch_.loaded();  // not yet started
  adopt_index();  // the state names dataset indices and sizes
  LoaderState state;
  state.seed = options_.seed;
  state.dataset_size = dataset_size_;
  state.rank = options_.rank;
  state.world_size = options_.world_size;
  state.options_fingerprint = options_fingerprint();
  // Staged device batches were taken from the ring but not handed out; a
  // batch put back was handed out and taken back.
  epoch_.fill_state(state, static_cast<int64_t>(staged_.size()) + (put_back_ ? 1 : 0));
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
  adopt_index();  // a state is a position in the sampler's order
  check_state_matches(state);
  epoch_.load(state, [this](const std::vector<int64_t>& order) { check_order(order); });
}

}  // namespace ringloader
