// SPDX-License-Identifier: BSD-3-Clause
// Dataset::tar_shards: the public face of loader/data/tar/tar_index.
#include <algorithm>

#include "loader/data/fetch/private_cache_dir.h"
#include "loader/data/tar/shard_counter.h"
#include "loader/data/fetch/shard_input.h"
#include "loader/data/tar/tar_index.h"
#include "loader/data/tar/tar_manifest.h"
#include "loader/data/tar/tar_member_reader.h"
#include "loader/ring/process_owned.h"
#include "ringloader/dataset.h"
#include "ringloader/errors.h"

namespace ringloader {
namespace {

// pipe: shards and no cache_dir: a folder of this process's own
// (private_cache_dir.h), so a shuffled epoch fetches each shard once and
// workers read the copy, instead of each worker streaming every shard and
// restarting commands to go back (issue 46).
data::ShardCacheOptions private_cache(data::ShardCacheOptions cache) {
  auto dir = data::PrivateCacheDir::create();
  cache.dir = dir->path();
  cache.limit_bytes = dir->bounded_limit(cache.limit_bytes);
  cache.owner = std::move(dir);
  return cache;
}

}  // namespace

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
  data::TarIndex shards = data::tar_shard_list(urls, options.shuffle_buffer, cache);
  const bool all_pipes = std::all_of(shards.shards.begin(), shards.shards.end(),
                                     [](const std::string& url) { return data::is_pipe_url(url); });
  const bool user_cache = cache.enabled();
  if (!user_cache && all_pipes && options.private_cache) shards.cache = private_cache(cache);
  // Its threads and commands stay the making process's (a fork child's copy
  // of the Dataset leaks it).
  auto counter = ring::make_shared_process_owned<data::ShardCounter>(std::move(shards), false,
                                                                     options.index_streams);
  if (!options.index_in_background || user_cache || !all_pipes) {
    return from_tar_index(counter->finish(), options.mode);
  }
  // Local shards index from their headers in seconds; pipe: ones are
  // downloads, read in the background while the first epoch starts.
  Dataset dataset;
  dataset.kind_ = Kind::kTar;
  dataset.mode_ = options.mode;
  dataset.shuffle_buffer_ = options.shuffle_buffer;
  dataset.counter_ = std::move(counter);
  return dataset;
}

const std::shared_ptr<const data::TarIndex>& Dataset::tar_index() const {
  return counter_ ? counter_->index() : tar_;
}

const std::vector<int64_t>& Dataset::shard_sizes() const {
  static const std::vector<int64_t> kNone;
  return kind_ == Kind::kTar && tar_index() ? tar_index()->shard_sizes : kNone;
}

Dataset Dataset::shard_named_view() const {
  if (!counter_) throw OptionError("ringloader: shard_named_view needs tar shards indexed in the background");
  data::TarIndex view;
  view.shards = counter_->urls();
  view.shuffle_buffer = counter_->shuffle_buffer();
  view.streamed = true;
  view.cache = counter_->cache();  // the private cache's copies
  return from_tar_index(std::move(view), mode_);
}

std::shared_ptr<data::ShardCounter> Dataset::background_index() const {
  return counter_ && !counter_->complete() ? counter_ : nullptr;
}

TarMember Dataset::tar_member(int64_t index) const {
  if (kind_ != Kind::kTar) throw OptionError("ringloader: tar_member needs a tar dataset");
  tar().require_placed("tar_member");
  data::TarSample sample = tar().sample(index);
  // The table's shard ids are below its shard count, which a worker's
  // TarIndex::from_json checked against this list.
  return {tar().shards.at(static_cast<size_t>(sample.shard)), sample.offset, sample.size,
          sample.label, std::move(sample.image_name)};
}

std::vector<uint8_t> Dataset::tar_member_bytes(int64_t index, int64_t* label) const {
  if (kind_ != Kind::kTar) throw OptionError("ringloader: tar_member_bytes needs a tar dataset");
  data::TarMemberReader reader(tar());
  std::vector<uint8_t> bytes;
  const int64_t read_label = reader.read(index, bytes);
  if (label) *label = read_label;
  return bytes;
}

Dataset Dataset::from_tar_index(data::TarIndex index, ColorMode mode) {
  Dataset dataset;
  dataset.kind_ = Kind::kTar;
  dataset.mode_ = mode;
  dataset.shuffle_buffer_ = index.shuffle_buffer;
  dataset.tar_ = std::make_shared<const data::TarIndex>(std::move(index));
  return dataset;
}

}  // namespace ringloader
