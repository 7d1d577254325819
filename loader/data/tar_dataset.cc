// SPDX-License-Identifier: BSD-3-Clause
// Dataset::tar_shards: the public face of loader/data/tar_index.
#include "loader/data/tar_index.h"
#include "loader/data/tar_manifest.h"
#include "loader/data/tar_member_reader.h"
#include "ringloader/dataset.h"
#include "ringloader/errors.h"

namespace ringloader {

Dataset Dataset::tar_shards(const std::vector<std::string>& urls,
                            const TarShardOptions& options) {
  data::ShardCacheOptions cache;
  cache.dir = options.cache_dir;
  cache.limit_bytes = options.cache_limit_bytes;
  cache.prefetch_shards = options.prefetch_shards;
  cache.cache_local = options.cache_local;
  cache.fetch_attempts = options.fetch_attempts;
  if (!options.index.empty()) {
    return from_tar_index(
        data::load_tar_manifest(options.index, urls, options.shuffle_buffer, cache),
        options.mode);
  }
  return from_tar_index(data::index_tar_shards(urls, options.shuffle_buffer, cache, nullptr,
                                                options.index_streams),
                        options.mode);
}

TarMember Dataset::tar_member(int64_t index) const {
  if (!tar_) throw OptionError("ringloader: tar_member needs a tar dataset");
  tar_->require_placed("tar_member");
  data::TarSample sample = tar_->sample(index);
  // The table's shard ids are below its shard count, which a worker's
  // TarIndex::from_json checked against this list.
  return {tar_->shards.at(static_cast<size_t>(sample.shard)), sample.offset, sample.size,
          sample.label, std::move(sample.image_name)};
}

std::vector<uint8_t> Dataset::tar_member_bytes(int64_t index, int64_t* label) const {
  if (!tar_) throw OptionError("ringloader: tar_member_bytes needs a tar dataset");
  data::TarMemberReader reader(*tar_);
  std::vector<uint8_t> bytes;
  const int64_t read_label = reader.read(index, bytes);
  if (label) *label = read_label;
  return bytes;
}

Dataset Dataset::from_tar_index(data::TarIndex index, ColorMode mode) {
  Dataset dataset;
  dataset.kind_ = Kind::kTar;
  dataset.mode_ = mode;
  dataset.shard_sizes_ = index.shard_sizes;
  dataset.shuffle_buffer_ = index.shuffle_buffer;
  dataset.tar_ = std::make_shared<const data::TarIndex>(std::move(index));
  return dataset;
}

}  // namespace ringloader
