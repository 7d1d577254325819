// SPDX-License-Identifier: BSD-3-Clause
// WebDataset's sample rule, in one place for everything that reads shards:
// consecutive members sharing a key are one sample (000123.jpg + 000123.cls),
// its image the first member with an image extension, its label the integer
// text of <key>.cls (-1 without one). The trainer's indexer and a worker
// that streams a shard of a counts-only index group alike, so the k-th
// sample is the same sample for both.
#pragma once

#include <cstdint>
#include <string>

#include "loader/data/tables/tar_sample_table.h"
#include "loader/data/tar/tar_walk.h"

namespace ringloader::data {

// A finished sample; `image` holds the image's bytes when the walk read them.
struct GroupedSample {
  TarSample sample;
  std::string image;
};

// Not thread-safe: one per shard walk.
class TarSampleGrouper {
 public:
  TarSampleGrouper(std::string shard_url, int32_t shard)
      : url_(std::move(shard_url)), shard_(shard) {}

  // Adds the next member of the archive. When it starts a new key, the
  // sample before it is finished: moved into `done`, and true returned.
  // Throws IoError naming the shard and member for a .cls that is not an
  // integer, or a finished sample without an image member.
  bool add(TarMember&& member, GroupedSample& done);
  // At the end of the archive: the last sample, if any.
  bool finish(GroupedSample& done);

  // Members whose bytes the grouping itself needs (labels).
  static bool is_label(const std::string& name);
  // Labels and images: what a reader of samples' bytes asks the walk for.
  static bool is_label_or_image(const std::string& name);

 private:
  bool take(GroupedSample& done);

  std::string url_;
  int32_t shard_;
  std::string key_;
  GroupedSample current_;
  bool has_image_ = false;
  int members_ = 0;
};

}  // namespace ringloader::data
