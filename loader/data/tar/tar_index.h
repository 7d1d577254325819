// SPDX-License-Identifier: BSD-3-Clause
// Folder loader/data/tar/: WebDataset-style tar shards. Reading the format
// (tar_format, tar_walk), grouping members into samples (tar_grouper),
// the index of a set of shards (this file, tar_manifest for its file,
// shard_counter for indexing in the background, shard_starts), reading a
// sample back (tar_member_reader, tar_sample_stream), patterns
// (brace_expand), Dataset::tar_shards (tar_dataset.cc) and writing shards
// (tar_writer). Where a shard's bytes come from is fetch/'s business.
//
// The samples of a set of WebDataset-style tar shards, found once in the
// trainer: members are grouped by key (000123.jpg + 000123.cls = one
// sample), and each sample records where its image's bytes lie, so any
// sample can be read by index (resume, any worker) without scanning.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/data/fetch/shard_cache.h"
#include "loader/data/tables/tar_sample_table.h"
#include "ringloader/dataset.h"

namespace ringloader::data {

// The shard list and options are small and travel in the JSON description;
// the samples live in one sealed table (tar_sample_table.h) that the trainer
// builds and every worker maps, so no process holds a private copy of them.
struct TarIndex {
  std::vector<std::string> shards;    // paths or pipe: URLs, in pattern order
  std::vector<int64_t> shard_sizes;   // samples per shard
  // The samples, shard by shard, in archive order.
  std::shared_ptr<const TarSampleTable> table;
  int64_t shuffle_buffer = 0;
  // Bytes of each shard when indexed through the cache (a fetch is checked
  // against it), else 0: unknown.
  std::vector<uint64_t> shard_bytes;
  ShardCacheOptions cache;            // where workers find fetched shards
  // The shard index file (manifest) this index was read from, else "":
  // named by a worker that finds a member that no longer matches it.
  std::string manifest;
  // Whether some samples have no place in the table (TarSample::placed()):
  // their shards came from a counts-only index (a plain wids index), so
  // only the worker that streams such a shard learns their labels and names.
  bool has_unplaced = false;
  // A worker's view of shards still being indexed in the background
  // (TarShardOptions::index_in_background): shards and shuffle buffer only,
  // no sizes, no table. Every sample it is asked for is a ShardSample
  // (dataset.h), read by streaming its shard to it, its label from there.
  bool streamed = false;

  // Throws OptionError when has_unplaced: `what` needs every sample's
  // label or place, and the message says how to write a full index.
  void require_placed(const std::string& what) const;
  int64_t size() const { return table ? table->size() : 0; }
  // Sample `index`, checked (IoError naming the table and sample).
  TarSample sample(int64_t index) const { return table->sample(index); }

  // The description names the table (its /proc/<pid>/fd path, count and
  // digest); from_json maps it and checks it against the shard list:
  // IoError naming the table when they disagree.
  nlohmann::json to_json() const;
  static TarIndex from_json(const nlohmann::json& description);
};

// The shard list of `urls` (brace patterns expanded), nothing indexed:
// OptionError for no shard, too many, or a negative shuffle buffer.
TarIndex tar_shard_list(const std::vector<std::string>& urls, int64_t shuffle_buffer,
                        const ShardCacheOptions& cache = {});

// Expands brace patterns in each URL, then indexes every shard: local
// shards by their headers only (seeking over data), pipe: shards by
// streaming them once. With a cache, shards it caches are fetched into it
// and indexed from the copy (so indexing is the node's one fetch when the
// cache holds them all). Throws IoError naming shard and member for a bad or
// truncated shard, a sample without an image member, or a .cls that is not
// an integer, or a fetch that kept failing; OptionError for no shard at all.
// `file_sizes` (optional): each shard's bytes, read to its end (what a shard
// index records; the tar walk itself may stop at the end-of-archive block).
// `streams`: shards read at once (TarShardOptions::index_streams); the
// table is in shard order whatever the order they finish in, and an error
// is the one the lowest failing shard gave.
TarIndex index_tar_shards(const std::vector<std::string>& urls,
                          int64_t shuffle_buffer,
                          const ShardCacheOptions& cache = {},
                          std::vector<uint64_t>* file_sizes = nullptr,
                          int streams = TarShardOptions{}.index_streams);

// "sample 17 (train-0001.tar member 000017.jpg)".
std::string describe_tar_sample(const TarIndex& index, int64_t sample);

}  // namespace ringloader::data
