// SPDX-License-Identifier: BSD-3-Clause
// LoaderState as plain data: JSON for checkpoints, and the merge of all
// ranks' states for an elastic resume. No Loader here.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <regex>

#include "ringloader/errors.h"
#include "ringloader/loader_state.h"

namespace ringloader {
namespace {

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

// Version 1 kept rank and world size inside the fingerprint text.
void upgrade_v1(LoaderState& state) {
  static const std::regex distributed(" rank=([0-9]+) world_size=([0-9]+)");
  std::smatch match;
  if (std::regex_search(state.options_fingerprint, match, distributed)) {
    state.rank = std::stoll(match[1].str());
    state.world_size = std::stoll(match[2].str());
    state.options_fingerprint =
        std::regex_replace(state.options_fingerprint, distributed, "");
  }
  state.version = LoaderState::kVersion;
}

[[noreturn]] void disagree(const std::string& what) {
  throw OptionError("ringloader: the loader states to merge disagree: " + what +
                    "; pass the states all ranks saved at one step");
}

}  // namespace

nlohmann::json LoaderState::to_json() const {
  nlohmann::json stages = nlohmann::json::array();
  for (const ElasticStage& stage : elastic) {
    stages.push_back({{"world_size", stage.world_size}, {"batches", stage.batches}});
  }
  return {{"version", version},
          {"epoch", epoch},
          {"batches_consumed", batches_consumed},
          {"batches_in_epoch", batches_in_epoch},
          {"seed", seed},
          {"dataset_size", dataset_size},
          {"rank", rank},
          {"world_size", world_size},
          {"options_fingerprint", options_fingerprint},
          {"order", order},
          {"order_hash", hex(order_hash)},
          {"elastic", std::move(stages)},
          {"rank_batches", rank_batches}};
}

LoaderState LoaderState::from_json(const nlohmann::json& json) {
  if (!json.is_object()) throw OptionError("ringloader: loader state is not an object");
  LoaderState state;
  state.version = field<int>(json, "version");
  if (state.version != kVersion && state.version != 1) {
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
  if (state.version == 1) {
    upgrade_v1(state);
    return state;
  }
  state.rank = field<int64_t>(json, "rank");
  state.world_size = field<int64_t>(json, "world_size");
  for (const auto& stage : field<nlohmann::json>(json, "elastic")) {
    state.elastic.push_back({field<int64_t>(stage, "world_size"),
                             field<std::vector<int64_t>>(stage, "batches")});
  }
  state.rank_batches = field<std::vector<int64_t>>(json, "rank_batches");
  return state;
}

LoaderState LoaderState::merge(const std::vector<LoaderState>& states) {
  if (states.empty()) throw OptionError("ringloader: no loader states to merge");
  const LoaderState& first = states.front();
  const int64_t world = first.world_size;
  if (static_cast<int64_t>(states.size()) != world) {
    disagree(std::to_string(states.size()) + " states for world size " +
             std::to_string(world));
  }
  std::vector<const LoaderState*> by_rank(static_cast<size_t>(world), nullptr);
  for (const LoaderState& state : states) {
    const std::string who = "rank " + std::to_string(state.rank);
    if (state.world_size != world) {
      disagree(who + " saved world size " + std::to_string(state.world_size) +
               ", rank " + std::to_string(first.rank) + " " + std::to_string(world));
    }
    if (state.rank < 0 || state.rank >= world || by_rank[static_cast<size_t>(state.rank)]) {
      disagree(who + " is out of range or given twice");
    }
    by_rank[static_cast<size_t>(state.rank)] = &state;
    if (state.epoch != first.epoch) disagree(who + " is at epoch " + std::to_string(state.epoch));
    if (state.seed != first.seed || state.dataset_size != first.dataset_size ||
        state.options_fingerprint != first.options_fingerprint ||
        state.version != first.version) {
      disagree(who + " has another configuration");
    }
    if (state.batches_in_epoch != first.batches_in_epoch) {
      disagree(who + "'s epoch has " + std::to_string(state.batches_in_epoch) + " batches");
    }
    const bool same_history =
        state.elastic.size() == first.elastic.size() &&
        std::equal(state.elastic.begin(), state.elastic.end(), first.elastic.begin(),
                   [](const ElasticStage& a, const ElasticStage& b) {
                     return a.world_size == b.world_size && a.batches == b.batches;
                   });
    if (!same_history) disagree(who + " has another elastic history");
    if (!state.order.empty()) {
      disagree(who + "'s order came from set_order(); a caller's sampler is not "
               "merged");
    }
  }
  LoaderState merged = *by_rank[0];
  merged.rank_batches.clear();
  for (const LoaderState* state : by_rank) {
    merged.rank_batches.push_back(state->batches_consumed);
  }
  return merged;
}

}  // namespace ringloader
