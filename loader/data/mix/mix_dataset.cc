// SPDX-License-Identifier: BSD-3-Clause
// Folder loader/data/mix/: weighted mixes of the other datasets; the
// epoch's draw is the sampler's (loader/sampler/mix_order).
//
// Dataset::mix: the parts' samples concatenated into one description (so
// workers read a mix like any dataset) plus the per-part counts that the
// sampler draws each epoch from (loader/sampler/mix_order).
#include <string>

#include "loader/data/tar/tar_index.h"
#include "loader/sampler/mix_order.h"
#include "ringloader/dataset.h"
#include "ringloader/errors.h"

namespace ringloader {

std::vector<int64_t> mix_counts(const std::vector<int64_t>& sizes,
                                const std::vector<double>& weights, int64_t epoch_size) {
  return sampler::choose_from_weights(sizes, weights, epoch_size);
}

Dataset Dataset::concat_tar(const std::vector<std::pair<Dataset, double>>& parts) {
  data::TarIndex index;
  data::TarSampleTableBuilder samples;
  index.shuffle_buffer = parts.front().first.tar().shuffle_buffer;
  for (const auto& [part, weight] : parts) {
    const auto first_shard = static_cast<int32_t>(index.shards.size());
    const data::TarIndex& source = part.tar();
    index.shards.insert(index.shards.end(), source.shards.begin(), source.shards.end());
    index.shard_sizes.insert(index.shard_sizes.end(), source.shard_sizes.begin(),
                             source.shard_sizes.end());
    // Sizes known from a shard cache (0: unknown), and the first part's
    // cache serves the mix (one folder per node).
    std::vector<uint64_t> bytes = source.shard_bytes;
    bytes.resize(source.shards.size(), 0);
    index.shard_bytes.insert(index.shard_bytes.end(), bytes.begin(), bytes.end());
    if (!index.cache.enabled() && source.cache.enabled()) index.cache = source.cache;
    index.has_unplaced = index.has_unplaced || source.has_unplaced;
    for (int64_t i = 0; i < source.size(); ++i) {
      data::TarSample sample = source.sample(i);
      sample.shard += first_shard;
      samples.add(sample);
    }
  }
  // A counts-only part's shards are streamed, never read from a cache; a
  // private cache (TarShardOptions::private_cache) is then left out.
  if (index.has_unplaced && index.cache.owner) index.cache = {};
  if (index.has_unplaced && index.cache.enabled()) {
    throw OptionError("ringloader: mix: a part indexed by sample counts only (a plain wids "
                      "index) cannot share the shard cache " + index.cache.dir +
                      " of another part; write that part's full index once with "
                      "`ringloader-shard --index-only INDEX.json URL...`");
  }
  // One table for the mix, which its workers map like any tar dataset's.
  index.table = data::TarSampleTable::build(std::move(samples), index.shards.size());
  return from_tar_index(std::move(index), parts.front().first.mode_);
}

Dataset Dataset::mix(const std::vector<std::pair<Dataset, double>>& parts,
                     const MixOptions& options) {
  if (parts.empty()) throw OptionError("ringloader: a mix needs at least one dataset");
  const Kind kind = parts.front().first.kind_;
  std::vector<int64_t> sizes;
  std::vector<double> weights;
  for (size_t p = 0; p < parts.size(); ++p) {
    const Dataset& part = parts[p].first;
    if (!part.mix_.empty()) {
      throw OptionError("ringloader: mixed dataset " + std::to_string(p) +
                        " is itself a mix; list its parts instead");
    }
    if (part.kind_ == Kind::kIdx || part.kind_ == Kind::kRows || part.kind_ != kind) {
      throw OptionError("ringloader: mixed dataset " + std::to_string(p) +
                        " is of another kind; a native mix is all file-backed "
                        "(image_folder / file_list) or all tar shards (mix others "
                        "in Python: ringloader.datasets.Mix)");
    }
    if (part.mode_ != parts.front().first.mode_) {
      throw OptionError("ringloader: mixed dataset " + std::to_string(p) +
                        " has another color mode than dataset 0");
    }
    sizes.push_back(part.size());
    weights.push_back(parts[p].second);
  }
  const std::vector<int64_t> choose =
      sampler::choose_from_weights(sizes, weights, options.epoch_size);
  Dataset out;
  if (kind == Kind::kTar) {
    out = concat_tar(parts);
  } else {
    out = concat_files(parts);
  }
  for (size_t p = 0; p < parts.size(); ++p) {
    out.mix_.push_back({sizes[p], choose[p],
                        static_cast<int64_t>(parts[p].first.shard_sizes().size())});
  }
  return out;
}

}  // namespace ringloader
