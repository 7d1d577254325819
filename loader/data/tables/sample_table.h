// SPDX-License-Identifier: BSD-3-Clause
// Folder loader/data/tables/: the sealed tables the trainer builds once and
// every worker maps read-only (sealed_memfd): file samples (this file),
// tar samples (tar_sample_table) and tensor rows (tensor_rows, with
// Dataset::tensor_rows in rows_dataset.cc). Workers read memory the
// trainer wrote: every offset is bounds-checked.
//
// The sample table of a file-backed dataset (paths and labels), built once
// in the trainer into a sealed memfd that every worker maps read-only: a
// worker's private memory for the index stays O(1) in the dataset size
// (issue 29). Workers reach the memfd by the trainer's /proc/<pid>/fd path.
//
// The table is memory another process wrote: every offset and index read
// from it is bounds-checked before use, and a worker maps only a memfd
// sealed against writes, so it cannot change under a reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "loader/data/tables/sealed_memfd.h"

namespace ringloader::data {

// Layout (all little-endian host words, every column 8-byte aligned):
//   SampleTableHeader
//   labels        int64[count]
//   sample_folder uint32[count]  (padded to 8 bytes)
//   name_end      uint64[count]  (name i = pool[name_end[i-1], name_end[i]))
//   folder_end    uint64[folders]
//   class_end     uint64[classes]
//   pool          bytes[pool_bytes]
struct SampleTableHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint64_t count;
  uint64_t folders;
  uint64_t classes;
  uint64_t pool_bytes;
  uint64_t total_bytes;
  uint64_t digest;  // FNV-1a of every byte after the header
};
static_assert(sizeof(SampleTableHeader) == 64, "SampleTableHeader is 64 bytes");
static_assert(alignof(SampleTableHeader) == 8, "SampleTableHeader is 8-aligned");

inline constexpr uint64_t kSampleTableMagic = 0x4c42545053474e52ull;  // "RNGSPTBL"
inline constexpr uint32_t kSampleTableVersion = 1;

// Collects samples, then writes the sealed table. Paths are split into a
// folder (deduplicated) and a name, so a million files in a thousand
// folders cost about their names' bytes plus 20 bytes each.
class SampleTableBuilder {
 public:
  void add_class(std::string_view name);
  // A folder's id for add(); the same text gives the same id.
  uint32_t folder(std::string_view path);
  void add(uint32_t folder, std::string_view name, int64_t label);
  // Splits `path` at its last '/'.
  void add_path(std::string_view path, int64_t label);
  size_t size() const { return labels_.size(); }

 private:
  friend class SampleTable;
  std::vector<int64_t> labels_;
  std::vector<uint32_t> sample_folder_;
  std::vector<uint64_t> name_end_;
  std::string names_;
  std::vector<std::string> folders_;
  std::unordered_map<std::string, uint32_t> folder_ids_;
  std::vector<std::string> classes_;
};

class SampleTable {
 public:
  // Writes the builder's samples into a sealed memfd and maps it.
  static std::shared_ptr<const SampleTable> build(SampleTableBuilder&& builder);
  // Maps the table behind `path` (a /proc/<pid>/fd/<n> link). Throws
  // IoError naming the path and the reason: missing, not a sealed memfd,
  // bad magic / version / sizes.
  static std::shared_ptr<const SampleTable> open(const std::string& path);

  ~SampleTable();
  SampleTable(const SampleTable&) = delete;
  SampleTable& operator=(const SampleTable&) = delete;

  int64_t size() const { return static_cast<int64_t>(header_->count); }
  // Each checks `index` and the offsets it reads; IoError naming the
  // sample and what is out of range.
  std::string path(int64_t index) const;
  int64_t label(int64_t index) const;
  std::vector<std::string> classes() const;
  // The labels column, for a zero-copy view (size() values).
  const int64_t* labels() const { return labels_; }
  // Where workers open it: /proc/<this pid>/fd/<fd>.
  std::string proc_path() const;
  uint64_t bytes() const { return header_->total_bytes; }
  // FNV-1a of the table's bytes (from the header, so reading it touches no
  // column): what it holds, for state fingerprints.
  std::string digest() const;

 private:
  explicit SampleTable(const SealedMapping& mapping);
  void validate() const;
  std::string_view pool_range(uint64_t begin, uint64_t end, const char* what,
                              int64_t index) const;
  std::string_view name(int64_t index) const;
  std::string_view folder_text(uint64_t folder, int64_t index) const;

  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  const SampleTableHeader* header_ = nullptr;
  const int64_t* labels_ = nullptr;
  const uint32_t* sample_folder_ = nullptr;
  const uint64_t* name_end_ = nullptr;
  const uint64_t* folder_end_ = nullptr;
  const uint64_t* class_end_ = nullptr;
  const char* pool_ = nullptr;
};

}  // namespace ringloader::data
