// SPDX-License-Identifier: BSD-3-Clause
// The per-sample part of a tar shard index (shard, offset, size, label,
// member name), built once in the trainer into a sealed memfd that every
// worker maps read-only, as the sample table of file datasets is
// (sample_table.h): a worker's private memory for the index stays O(1) in
// the dataset size (issue 29), where it used to parse every sample out of
// its configuration. Workers reach it by the trainer's /proc/<pid>/fd path.
//
// The table is memory another process wrote: every index and offset read
// from it is checked before use, and a worker maps only a memfd sealed
// against writes, so nothing can change once it has been checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loader/data/tables/sealed_memfd.h"

namespace ringloader::data {

// The offset of a sample its index gave no place for (a counts-only index,
// tar_manifest.h): a worker finds it as the k-th sample of its shard by
// streaming the shard (tar_sample_stream.h), and reads its label there.
inline constexpr uint64_t kUnplacedOffset = UINT64_MAX;

// One sample, copied out of the table.
struct TarSample {
  int32_t shard = 0;        // index into TarIndex::shards
  uint64_t offset = 0;      // image bytes within the shard
  uint64_t size = 0;
  int64_t label = -1;       // from <key>.cls; -1 without one
  std::string image_name;   // the image member's name, for messages

  bool placed() const { return offset != kUnplacedOffset; }
};

// Layout (all little-endian host words, every column 8-byte aligned):
//   TarSampleTableHeader
//   offsets   uint64[count]
//   sizes     uint64[count]
//   labels    int64[count]
//   name_end  uint64[count]  (name i = pool[name_end[i-1], name_end[i]))
//   shard     int32[count]   (padded to 8 bytes)
//   pool      bytes[pool_bytes]
struct TarSampleTableHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint64_t count;
  uint64_t shards;      // every shard id is below it
  uint64_t pool_bytes;
  uint64_t total_bytes;
  uint64_t digest;      // FNV-1a of every byte after the header
  uint64_t reserved;    // 0
};
static_assert(sizeof(TarSampleTableHeader) == 64, "TarSampleTableHeader is 64 bytes");
static_assert(alignof(TarSampleTableHeader) == 8, "TarSampleTableHeader is 8-aligned");

inline constexpr uint64_t kTarSampleTableMagic = 0x4c42545241544e52ull;  // "RNTARTBL"
inline constexpr uint32_t kTarSampleTableVersion = 1;

// Collects samples in index order (shard by shard), then
// TarSampleTable::build writes them: about 36 bytes a sample plus its name.
class TarSampleTableBuilder {
 public:
  void add(const TarSample& sample);
  // Moves `other`'s samples after ours, in their order.
  void append(TarSampleTableBuilder&& other);
  size_t size() const { return offsets_.size(); }

 private:
  friend class TarSampleTable;
  std::vector<uint64_t> offsets_, sizes_, name_end_;
  std::vector<int64_t> labels_;
  std::vector<int32_t> shards_;
  std::string names_;
};

class TarSampleTable {
 public:
  // Writes the builder's samples into a sealed memfd and maps it; `shards`:
  // how many shards their ids index (each must be below it).
  static std::shared_ptr<const TarSampleTable> build(TarSampleTableBuilder&& builder,
                                                     uint64_t shards);
  // Maps the table behind `path` (a /proc/<pid>/fd/<n> link). Throws
  // IoError "ringloader: tar sample table <path>: <reason>": missing, not a
  // sealed memfd, bad magic / version / sizes.
  static std::shared_ptr<const TarSampleTable> open(const std::string& path);

  ~TarSampleTable();
  TarSampleTable(const TarSampleTable&) = delete;
  TarSampleTable& operator=(const TarSampleTable&) = delete;

  int64_t size() const { return static_cast<int64_t>(header_->count); }
  uint64_t shards() const { return header_->shards; }
  // Each checks `index` and what it reads (a shard id below shards(), a
  // name inside the pool, offset + size without overflow): IoError naming
  // the table, the sample and what is out of range.
  TarSample sample(int64_t index) const;
  int32_t shard(int64_t index) const;
  uint64_t offset(int64_t index) const;
  int64_t label(int64_t index) const;
  // The labels column, for a zero-copy view (size() values).
  const int64_t* labels() const { return labels_; }
  // Where workers open it: /proc/<this pid>/fd/<fd>.
  std::string proc_path() const;
  uint64_t bytes() const { return header_->total_bytes; }
  // FNV-1a of the table's bytes, from the header (reading it touches no
  // column): a worker compares it with its description's.
  std::string digest() const;

 private:
  TarSampleTable(const SealedMapping& mapping, std::string path);
  void validate() const;
  void check_index(int64_t index) const;
  [[noreturn]] void fail(int64_t index, const std::string& what) const;

  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  std::string path_;  // for messages: the path it was opened by, or "memfd"
  const TarSampleTableHeader* header_ = nullptr;
  const uint64_t* offsets_ = nullptr;
  const uint64_t* sizes_ = nullptr;
  const int64_t* labels_ = nullptr;
  const uint64_t* name_end_ = nullptr;
  const int32_t* shard_ = nullptr;
  const char* pool_ = nullptr;
};

}  // namespace ringloader::data
