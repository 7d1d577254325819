// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar/tar_index.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "loader/data/tar/brace_expand.h"
#include "loader/data/tar/shard_counter.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

// A worker's table must be the one its description names, and agree with
// the shard list that travels beside it: the reader trusts both to find
// each shard's samples (shard_sizes) and to name the shard of each sample.
void check_table(const TarIndex& index, const std::string& path, int64_t count,
                 const std::string& digest) {
  int64_t total = 0;  // -1: sizes that are negative or pass the count
  for (int64_t size : index.shard_sizes) {
    if (size < 0 || size > count - total) {
      total = -1;
      break;
    }
    total += size;
  }
  const TarSampleTable& table = *index.table;
  std::string why;
  if (table.size() != count || table.digest() != digest) {
    why = "holds " + std::to_string(table.size()) + " samples (digest " + table.digest() +
          "), its description " + std::to_string(count) + " (digest " + digest + ")";
  } else if (table.shards() != index.shards.size() ||
             index.shard_sizes.size() != index.shards.size() ||
             index.shard_bytes.size() != index.shards.size() || total != count) {
    why = "holds samples of " + std::to_string(table.shards()) + " shards, its description " +
          std::to_string(index.shards.size()) + " shards of " +
          std::to_string(index.shard_sizes.size()) + " sizes summing to " +
          (total < 0 ? "more than " + std::to_string(count) + " (or negative)"
                     : std::to_string(total));
  }
  if (!why.empty()) throw IoError("ringloader: tar sample table " + path + " " + why);
}

}  // namespace

TarIndex tar_shard_list(const std::vector<std::string>& urls, int64_t shuffle_buffer,
                        const ShardCacheOptions& cache) {
  if (shuffle_buffer < 0) {
    throw OptionError("ringloader: shuffle_buffer must be >= 0, got " +
                      std::to_string(shuffle_buffer));
  }
  TarIndex index;
  index.shuffle_buffer = shuffle_buffer;
  for (const std::string& url : urls) {
    for (std::string& shard : expand_braces(url)) index.shards.push_back(std::move(shard));
  }
  if (index.shards.empty()) throw OptionError("ringloader: no tar shard given");
  // ShardSample names hold a shard in 30 bits.
  if (index.shards.size() >= (size_t{1} << 30)) {
    throw OptionError("ringloader: too many tar shards");
  }
  index.cache = cache;
  return index;
}

TarIndex index_tar_shards(const std::vector<std::string>& urls,
                          int64_t shuffle_buffer, const ShardCacheOptions& cache,
                          std::vector<uint64_t>* file_sizes, int streams) {
  return ShardCounter(tar_shard_list(urls, shuffle_buffer, cache), file_sizes != nullptr,
                      streams)
      .finish(file_sizes);
}

std::string describe_tar_sample(const TarIndex& index, int64_t sample) {
  // The table checked the shard id against its own count; the shard list
  // is checked against that count when a worker maps the table.
  const TarSample s = index.sample(sample);
  std::string place = " member " + s.image_name;
  if (!s.placed()) {  // only errors describe samples: a walk over the shards is cheap enough
    int64_t first = 0;
    for (int32_t shard = 0; shard < s.shard && shard < static_cast<int32_t>(index.shard_sizes.size());
         ++shard) {
      first += index.shard_sizes[static_cast<size_t>(shard)];
    }
    place = " sample " + std::to_string(sample - first) + " of its shard";
  }
  return "sample " + std::to_string(sample) + " (" + index.shards.at(s.shard) + place + ")";
}

namespace {

nlohmann::json cache_json(const ShardCacheOptions& cache) {
  return {{"dir", cache.dir}, {"limit_bytes", cache.limit_bytes},
          {"prefetch_shards", cache.prefetch_shards}, {"cache_local", cache.cache_local},
          {"fetch_attempts", cache.fetch_attempts}, {"retry_backoff_s", cache.retry_backoff_s}};
}

void read_cache_json(const nlohmann::json& description, ShardCacheOptions& cache) {
  if (!description.contains("cache")) return;
  const auto& json = description.at("cache");
  cache.dir = json.at("dir").get<std::string>();
  cache.limit_bytes = json.at("limit_bytes").get<uint64_t>();
  cache.prefetch_shards = json.at("prefetch_shards").get<int>();
  cache.cache_local = json.at("cache_local").get<bool>();
  cache.fetch_attempts = json.at("fetch_attempts").get<int>();
  cache.retry_backoff_s = json.value("retry_backoff_s", 0.2);
}

}  // namespace

nlohmann::json TarIndex::to_json() const {
  if (streamed) {
    nlohmann::json out = {{"shards", shards}, {"shuffle_buffer", shuffle_buffer},
                          {"streamed", true}};
    // The private cache the indexer fills (TarShardOptions::private_cache).
    if (cache.enabled()) out["cache"] = cache_json(cache);
    return out;
  }
  nlohmann::json out = {{"shards", shards}, {"shard_sizes", shard_sizes},
          {"shuffle_buffer", shuffle_buffer}, {"table", table->proc_path()},
          {"count", table->size()}, {"digest", table->digest()}, {"unplaced", has_unplaced}};
  if (!manifest.empty()) out["manifest"] = manifest;
  if (cache.enabled()) {
    out["shard_bytes"] = shard_bytes;
    out["cache"] = cache_json(cache);
  }
  return out;
}

void TarIndex::require_placed(const std::string& what) const {
  if (streamed) {
    throw OptionError("ringloader: " + what + " needs the shards' index; a worker's view of "
                      "shards indexed in the background has none");
  }
  if (!has_unplaced) return;
  throw OptionError("ringloader: " + what + " needs a full shard index: " +
                    (manifest.empty() ? std::string("its index") : manifest) +
                    " counts samples only (a plain wids index), so only the worker "
                    "that streams a shard reads its labels and members; write ringloader's "
                    "full index once with `ringloader-shard --index-only INDEX.json URL...`");
}

TarIndex TarIndex::from_json(const nlohmann::json& description) {
  TarIndex index;
  index.shards = description.at("shards").get<std::vector<std::string>>();
  index.shuffle_buffer = description.at("shuffle_buffer").get<int64_t>();
  if (description.value("streamed", false)) {
    // Read-only: ShardSample names are checked against the shard count.
    if (index.shards.empty() || index.shards.size() >= (size_t{1} << 30)) {
      throw IoError("ringloader: a streamed tar description lists " +
                    std::to_string(index.shards.size()) + " shards");
    }
    index.streamed = true;
    read_cache_json(description, index.cache);
    return index;
  }
  index.shard_sizes = description.at("shard_sizes").get<std::vector<int64_t>>();
  index.shard_bytes.assign(index.shards.size(), 0);
  index.manifest = description.value("manifest", std::string());
  index.has_unplaced = description.value("unplaced", false);
  if (description.contains("shard_bytes")) {
    index.shard_bytes = description.at("shard_bytes").get<std::vector<uint64_t>>();
  }
  read_cache_json(description, index.cache);
  const auto path = description.at("table").get<std::string>();
  index.table = TarSampleTable::open(path);
  check_table(index, path, description.at("count").get<int64_t>(),
              description.at("digest").get<std::string>());
  return index;
}

}  // namespace ringloader::data
