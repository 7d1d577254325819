// SPDX-License-Identifier: BSD-3-Clause
#include "loader/sampler/mix_order.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "loader/sampler/sampler.h"
#include "loader/sampler/shard_order.h"
#include "ringloader/errors.h"
#include "ringloader/random.h"

namespace ringloader::sampler {
namespace {

constexpr uint32_t kMixStream = 0x4d58u;  // "MX": apart from "SH", "SD", "SB"

// One pass's key: distinct per (stream, pass), so passes differ and streams
// of equal size are not shuffled alike.
uint64_t pass_seed(uint64_t seed, size_t stream, int64_t pass) {
  uint64_t x = seed ^ (0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(stream) + 1)) ^
               (0xBF58476D1CE4E5B9ull * (static_cast<uint64_t>(pass) + 1));
  x ^= x >> 31;
  return x;
}

void stream_sequence(const MixStream& stream, size_t s, int64_t first, bool shuffle,
                     int64_t buffer, uint64_t seed, uint64_t epoch,
                     std::vector<int64_t>& out) {
  std::vector<int64_t> pass_order;
  for (int64_t pass = 0; pass * stream.size < stream.choose; ++pass) {
    const int64_t take = std::min(stream.size, stream.choose - pass * stream.size);
    if (!shuffle) {
      pass_order.resize(static_cast<size_t>(stream.size));
      std::iota(pass_order.begin(), pass_order.end(), 0);
    } else if (!stream.shard_sizes.empty()) {
      shard_shuffle_order(stream.shard_sizes, buffer, pass_seed(seed, s, pass), epoch,
                          pass_order);
    } else {
      shuffle_indices(pass_order, stream.size, pass_seed(seed, s, pass), epoch);
    }
    for (int64_t i = 0; i < take; ++i) out.push_back(first + pass_order[i]);
  }
}

}  // namespace

int64_t mix_length(const std::vector<MixStream>& streams) {
  int64_t total = 0;
  for (const MixStream& s : streams) total += s.choose;
  return total;
}

void mix_order(const std::vector<MixStream>& streams, bool shuffle,
               int64_t shuffle_buffer, uint64_t seed, uint64_t epoch,
               std::vector<int64_t>& out) {
  std::vector<std::vector<int64_t>> sequences(streams.size());
  int64_t first = 0;
  for (size_t s = 0; s < streams.size(); ++s) {
    stream_sequence(streams[s], s, first, shuffle, shuffle_buffer, seed, epoch,
                    sequences[s]);
    first += streams[s].size;
  }
  out.clear();
  out.reserve(static_cast<size_t>(mix_length(streams)));
  std::vector<size_t> next(streams.size(), 0);
  if (shuffle) {
    // Pick the stream of each position with probability proportional to
    // what it has left: a uniform random interleaving.
    SampleRng rng(seed, epoch, 0, kMixStream);
    int64_t left = mix_length(streams);
    for (; left > 0; --left) {
      int64_t pick = rng.integer(0, left - 1);
      size_t s = 0;
      for (;; ++s) {
        const auto rest = static_cast<int64_t>(sequences[s].size() - next[s]);
        if (pick < rest) break;
        pick -= rest;
      }
      out.push_back(sequences[s][next[s]++]);
    }
    return;
  }
  // Even spread: the next sample is the stream whose (j + 0.5) / choose is
  // smallest (ties to the lower stream), compared exactly in integers.
  for (int64_t left = mix_length(streams); left > 0; --left) {
    size_t best = streams.size();
    for (size_t s = 0; s < streams.size(); ++s) {
      if (next[s] >= sequences[s].size()) continue;
      if (best == streams.size() ||
          (2 * static_cast<int64_t>(next[s]) + 1) * streams[best].choose <
              (2 * static_cast<int64_t>(next[best]) + 1) * streams[s].choose) {
        best = s;
      }
    }
    out.push_back(sequences[best][next[best]++]);
  }
}

std::vector<int64_t> choose_from_weights(const std::vector<int64_t>& sizes,
                                         const std::vector<double>& weights,
                                         int64_t epoch_size) {
  if (sizes.size() != weights.size() || sizes.empty()) {
    throw OptionError("ringloader: a mix needs one weight per dataset");
  }
  double total_weight = 0;
  for (size_t s = 0; s < weights.size(); ++s) {
    if (!(weights[s] > 0) || !std::isfinite(weights[s])) {
      throw OptionError("ringloader: mix weight " + std::to_string(s) + " is " +
                        std::to_string(weights[s]) + "; weights must be positive");
    }
    if (sizes[s] <= 0) {
      throw OptionError("ringloader: mixed dataset " + std::to_string(s) + " is empty");
    }
    total_weight += weights[s];
  }
  if (epoch_size < 0) throw OptionError("ringloader: mix epoch_size must be >= 0");
  if (epoch_size == 0) epoch_size = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  std::vector<int64_t> choose(sizes.size());
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    const double exact = static_cast<double>(epoch_size) * weights[s] / total_weight;
    choose[s] = static_cast<int64_t>(std::floor(exact));
    given += choose[s];
    remainders.emplace_back(exact - static_cast<double>(choose[s]), s);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < epoch_size; ++i, ++given) ++choose[remainders[i].second];
  return choose;
}

}  // namespace ringloader::sampler
