// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/distributed.h"

#include <algorithm>

#include <cstdlib>
#include <string>

#include "ringloader/errors.h"

namespace ringloader::trainer {
namespace {

// The variable's integer value, or `fallback` when it is unset or empty.
// A value that is not an integer is an error: silently loading rank 0's
// shard on every rank would train on a fraction of the data.
int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > (1L << 30)) {
    throw OptionError(std::string("ringloader: environment variable ") + name +
                      "='" + text + "' is not a non-negative integer");
  }
  return static_cast<int>(value);
}

}  // namespace

LoaderOptions resolve_distributed(LoaderOptions options) {
  if (options.world_size == -1) options.world_size = env_int("WORLD_SIZE", 1);
  if (options.rank == -1) options.rank = env_int("RANK", 0);
  if (options.world_size <= 0) {
    throw OptionError("ringloader: world_size must be positive (or -1 to read "
                      "$WORLD_SIZE), got " + std::to_string(options.world_size));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    throw OptionError("ringloader: rank " + std::to_string(options.rank) +
                      " is not in [0, world_size " +
                      std::to_string(options.world_size) + ")");
  }
  if (options.device == "cuda") {
    options.device = "cuda:" + std::to_string(env_int("LOCAL_RANK", 0));
  }
  return options;
}

sampler::SamplerOptions sampler_options(int64_t dataset_size,
                                        const LoaderOptions& options) {
  sampler::SamplerOptions out;
  out.dataset_size = dataset_size;
  out.batch_size = options.batch_size;
  out.shuffle = options.shuffle;
  out.drop_last = options.drop_last;
  out.seed = options.seed;
  out.rank = options.rank;
  out.world_size = options.world_size;
  return out;
}

std::vector<sampler::MixStream> mix_streams(const std::vector<MixPart>& parts,
                                            const std::vector<int64_t>& shard_sizes) {
  std::vector<sampler::MixStream> streams;
  size_t first_shard = 0;
  for (const MixPart& part : parts) {
    sampler::MixStream stream{part.size, part.choose, {}};
    if (!shard_sizes.empty()) {
      const auto end = std::min(shard_sizes.size(), first_shard + static_cast<size_t>(part.shards));
      stream.shard_sizes.assign(shard_sizes.begin() + static_cast<std::ptrdiff_t>(first_shard),
                                shard_sizes.begin() + static_cast<std::ptrdiff_t>(end));
      first_shard = end;
    }
    streams.push_back(std::move(stream));
  }
  return streams;
}

}  // namespace ringloader::trainer
