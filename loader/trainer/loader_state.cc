// Mid-epoch resume: the Loader's position as plain data, and a fresh
// Loader's way back to it. Only positions are saved, never bytes: every
// batch is a function of (seed, epoch, rank, world_size, dataset, order), so
// the remaining batches of an epoch are recomputed exactly.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

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

uint64_t parse_hex(const std::string& text) {
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 16);
  if (text.empty() || *end != '\0') {
    throw OptionError("ringloader: loader state order_hash '" + text +
                      "' is not hexadecimal");
  }
  return value;
}

template <typename T>
T field(const nlohmann::json& state, const char* name) {
  auto it = state.find(name);
  if (it == state.end()) {
    throw OptionError(std::string("ringloader: loader state has no '") + name + "'");
  }
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw OptionError(std::string("ringloader: loader state field '") + name +
                      "': " + e.what());
  }
}

}  // namespace

nlohmann::json LoaderState::to_json() const {
  return {{"version", version},
          {"epoch", epoch},
          {"batches_consumed", batches_consumed},
          {"batches_in_epoch", batches_in_epoch},
          {"seed", seed},
          {"dataset_size", dataset_size},
          {"options_fingerprint", options_fingerprint},
          {"order", order},
          {"order_hash", hex(order_hash)}};
}

LoaderState LoaderState::from_json(const nlohmann::json& json) {
  if (!json.is_object()) throw OptionError("ringloader: loader state is not an object");
  LoaderState state;
  state.version = field<int>(json, "version");
  if (state.version != kVersion) {
    throw OptionError("ringloader: loader state version " +
                      std::to_string(state.version) + " is not " +
                      std::to_string(kVersion) + " (saved by another ringloader)");
  }
  state.epoch = field<int64_t>(json, "epoch");
  state.batches_consumed = field<int64_t>(json, "batches_consumed");
  state.batches_in_epoch = field<int64_t>(json, "batches_in_epoch");
  state.seed = field<uint64_t>(json, "seed");
  state.dataset_size = field<int64_t>(json, "dataset_size");
  state.options_fingerprint = field<std::string>(json, "options_fingerprint");
  state.order = field<std::vector<int64_t>>(json, "order");
  state.order_hash = parse_hex(field<std::string>(json, "order_hash"));
  return state;
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
      const std::string text = description.dump() + "\n" + config_.pipeline.to_json().dump();
      data_hash_ = hex(fnv1a(text.data(), text.size()));
    }
  }
  return "batch_size=" + std::to_string(options_.batch_size) +
         " shuffle=" + std::to_string(options_.shuffle) +
         " drop_last=" + std::to_string(options_.drop_last) +
         " rank=" + std::to_string(options_.rank) +
         " world_size=" + std::to_string(options_.world_size) +
         " data=" + data_hash_;
}

LoaderState Loader::Impl::state_dict() const {
  if (!epoch_open_ && resume_) return *resume_;  // loaded, not yet started
  LoaderState state;
  state.seed = options_.seed;
  state.dataset_size = dataset_size_;
  state.options_fingerprint = options_fingerprint();
  if (!epoch_open_) {
    state.epoch = next_epoch_;
    state.batches_in_epoch = size();
    return state;
  }
  state.epoch = epoch_;
  // Staged device batches were taken from the ring but not handed out.
  state.batches_consumed = cursor_ - static_cast<int64_t>(staged_.size());
  state.batches_in_epoch = batch_count_;
  if (order_is_custom_) state.order = order_;
  state.order_hash = order_hash(order_);
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
      state.batches_consumed > state.batches_in_epoch) {
    throw OptionError("ringloader: loader state position (epoch " +
                      std::to_string(state.epoch) + ", batch " +
                      std::to_string(state.batches_consumed) + " of " +
                      std::to_string(state.batches_in_epoch) + ") is impossible");
  }
}

void Loader::Impl::load_state_dict(const LoaderState& state) {
  check_state_matches(state);
  const bool complete = state.batches_consumed >= state.batches_in_epoch;
  const bool custom = !state.order.empty();
  const int64_t batches = custom ? batches_for(state.order.size())
                                 : sampler_.batches_per_epoch();
  if (batches != state.batches_in_epoch) {
    throw OptionError("ringloader: the loader state's epoch has " +
                      std::to_string(state.batches_in_epoch) +
                      " batches, this loader's has " + std::to_string(batches));
  }
  if (!complete && state.batches_consumed > 0) {
    std::vector<int64_t> order =
        custom ? state.order : sampler_.order(static_cast<uint64_t>(state.epoch));
    if (order_hash(order) != state.order_hash) {
      throw OptionError("ringloader: the loader state's epoch order differs from "
                        "the one this loader computes for epoch " +
                        std::to_string(state.epoch));
    }
  }
  if (custom && !complete) set_order(state.order);  // validates the indices
  resume_ = state;
  // An epoch seen to its end is done: the loader goes on with the next one
  // unless set_epoch() asks for that epoch again (then it yields nothing).
  next_epoch_ = complete ? state.epoch + 1 : state.epoch;
}

int64_t Loader::Impl::take_resume_offset() {
  if (!resume_) return 0;
  const LoaderState state = std::move(*resume_);
  resume_.reset();
  if (state.epoch != epoch_) return 0;
  const bool remaining = state.batches_consumed < batch_count_;
  if (remaining && state.batches_consumed > 0 && order_hash(order_) != state.order_hash) {
    // set_order() after load_state_dict() replaced the saved order.
    throw OptionError("ringloader: epoch " + std::to_string(epoch_) +
                      "'s order is not the one the loader state was saved with "
                      "(a sampler that cannot be reproduced?)");
  }
  return std::min(state.batches_consumed, batch_count_);
}

}  // namespace ringloader
