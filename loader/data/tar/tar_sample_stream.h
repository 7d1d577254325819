// SPDX-License-Identifier: BSD-3-Clause
// A shard read front to back as whole samples, numbered 0, 1, ... in
// archive order: how a worker finds the k-th sample of a shard whose index
// gave only its sample count (a plain wids index, docs/tar_shards.md).
// The grouping is the indexer's (tar_grouper.h), so sample k is the one a
// full index would have listed k-th.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "loader/data/fetch/shard_input.h"
#include "loader/data/tar/tar_grouper.h"
#include "loader/data/tar/tar_walk.h"

namespace ringloader::data {

// Not thread-safe: one reader at a time (TarMemberReader holds its lock).
class TarSampleStream {
 public:
  TarSampleStream(std::unique_ptr<ShardInput> input, const std::string& url, int32_t shard);

  // The next sample, its image's bytes read; false at the end of the
  // archive. Throws IoError naming the shard and member (tar_walk.h,
  // tar_grouper.h).
  bool next(GroupedSample& out);
  // The number the next sample next() returns will have.
  int64_t next_ordinal() const { return next_ordinal_; }
  // Whether the archive ended right after the sample next() last returned
  // (its end, not a following member, finished it).
  bool at_end() const { return at_end_; }
  uint64_t position() const { return input_->position(); }

 private:
  std::unique_ptr<ShardInput> input_;
  TarCursor cursor_;
  TarSampleGrouper grouper_;
  int64_t next_ordinal_ = 0;
  bool at_end_ = false;
};

}  // namespace ringloader::data
