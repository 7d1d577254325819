// SPDX-License-Identifier: BSD-3-Clause
// Which shard this process loads under torchrun: rank and world size from
// the options or the environment, and the GPU that "cuda" means here.
#pragma once

#include "loader/sampler/sampler.h"
#include "ringloader/dataset.h"
#include "ringloader/options.h"

namespace ringloader::trainer {

// Fills rank / world_size left at -1 from $RANK / $WORLD_SIZE (0 / 1 when
// unset) and turns device "cuda" into "cuda:$LOCAL_RANK" when LOCAL_RANK is
// set, so each local process of a multi-GPU node takes its own GPU. Throws
// OptionError for a rank outside [0, world_size) or an unreadable variable.
LoaderOptions resolve_distributed(LoaderOptions options);

// The sampler a Loader with these (resolved) options uses.
sampler::SamplerOptions sampler_options(int64_t dataset_size,
                                        const LoaderOptions& options);

// A mix's parts as the sampler's streams; `shard_sizes` (the mix's
// concatenated shards, empty for files) is split among the parts.
std::vector<sampler::MixStream> mix_streams(const std::vector<MixPart>& parts,
                                            const std::vector<int64_t>& shard_sizes);

}  // namespace ringloader::trainer
