// SPDX-License-Identifier: BSD-3-Clause
// A shard index file ("manifest"): the result of indexing tar shards, saved
// so that construction skips the pass over every shard (which for pipe:
// shards means reading the whole dataset before the first batch).
//
// The file is WebDataset's `wids` shard index (wids-shard-index-v1: a
// "shardlist" of {"url", "nsamples", "filesize"}) with ringloader's member
// table added to each shard entry and a version tag at the top, so wids
// reads it too (it ignores keys it does not know). docs/tar_shards.md,
// "Shard index", describes the format and its checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/data/tar/tar_index.h"

namespace ringloader::data {

constexpr const char kWidsKind[] = "wids-shard-index-v1";
constexpr int kRingloaderIndexVersion = 1;

// The manifest of `index`: shard s is listed under urls[s] (as it should be
// found again: relative paths are taken from the manifest's folder), with
// file_sizes[s] bytes (0: unknown).
nlohmann::json tar_manifest_json(const TarIndex& index, const std::vector<std::string>& urls,
                                 const std::vector<uint64_t>& file_sizes);

// Reads the manifest at `source` (a path or "pipe:<command>") and checks it
// against `urls` (brace patterns expanded; empty: take the manifest's own
// shard list). Never trusts it: IoError naming the manifest and the reason
// for bad JSON, another kind or version, a member table that disagrees with
// its counts or runs past its shard's filesize; OptionError for a shard
// list that is not `urls`; IoError
// "stale index" naming the shard when a local shard's size is not the
// recorded filesize. A plain wids index (counts, no member table) gives
// unplaced samples (TarIndex::has_unplaced), which workers find by
// streaming their shard; OptionError saying how to write a full index when
// a shard is local or the cache is on (those are read by offset), IoError
// for a count no shard could hold (above filesize / 1024, or 2^24).
// With no `urls`, a pipe: shard the manifest lists is a command the
// dataset names: IoError naming the manifest and why unless the manifest is
// a file only this user (or root) may change (file_trust.h); a manifest
// read from a pipe: command never is. Commands in `urls` always run.
TarIndex load_tar_manifest(const std::string& source, const std::vector<std::string>& urls,
                           int64_t shuffle_buffer, const ShardCacheOptions& cache = {});

}  // namespace ringloader::data
