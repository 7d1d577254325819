// SPDX-License-Identifier: BSD-3-Clause
// Rows of an in-memory tensor (torch's TensorDataset) and their labels,
// written once by the trainer into a sealed memfd that every worker maps
// read-only: a worker copies row `i` into its ring slot with one memcpy, no
// Python and no private copy of the tensor. Workers reach the memfd by the
// trainer's /proc/<pid>/fd path, as the sample table (sample_table.h).
//
// The file is memory another process wrote: its header is checked whole
// before any row is read (every count and offset against the mapped size,
// products only after their factors are bounded), and a worker maps only a
// memfd sealed against writes, so nothing can change under a reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/data/tables/sealed_memfd.h"
#include "ringloader/dataset.h"

namespace ringloader::data {

inline constexpr uint32_t kMaxRowDims = 8;

// Layout (little-endian host words):
//   TensorRowsHeader
//   rows    bytes[count * row_bytes]   at data_offset (64-aligned)
//   labels  int64[count]               at labels_offset (8-aligned), or
//                                      labels_offset == 0: no labels
struct TensorRowsHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint64_t count;
  uint32_t element_type;  // ElementType
  uint32_t row_dims;      // <= kMaxRowDims
  uint64_t row_shape[kMaxRowDims];
  uint64_t row_bytes;     // product(row_shape) * element size
  uint64_t data_offset;
  uint64_t labels_offset;
  uint64_t total_bytes;
  // What the rows and labels hold (FNV-1a over their 8-byte words, then
  // the tail bytes), computed once by the trainer; a resumed loader's state
  // names it, not the memfd's path. Not trusted for anything else.
  uint64_t digest;
};
static_assert(sizeof(TensorRowsHeader) == 136, "TensorRowsHeader is 136 bytes");
static_assert(alignof(TensorRowsHeader) == 8, "TensorRowsHeader is 8-aligned");

inline constexpr uint64_t kTensorRowsMagic = 0x53574f52524e4752ull;  // "RGNRROWS"
inline constexpr uint32_t kTensorRowsVersion = 1;

class TensorRows {
 public:
  // Writes `rows` into a sealed memfd and maps it. OptionError for a bad
  // description (no rows, too many dimensions, a negative size, a row of
  // 2 GiB or more), IoError when the memfd cannot be made.
  static std::shared_ptr<const TensorRows> build(const TensorRowsData& rows);
  // Maps the rows behind `path` (a /proc/<pid>/fd/<n> link). Throws IoError
  // naming the path and the reason: missing, not a sealed memfd, bad magic /
  // version / element type / sizes / offsets.
  static std::shared_ptr<const TensorRows> open(const std::string& path);

  ~TensorRows();
  TensorRows(const TensorRows&) = delete;
  TensorRows& operator=(const TensorRows&) = delete;

  int64_t size() const { return static_cast<int64_t>(header_->count); }
  ElementType element_type() const { return static_cast<ElementType>(header_->element_type); }
  std::vector<int64_t> row_shape() const;
  uint64_t row_bytes() const { return header_->row_bytes; }
  bool has_labels() const { return header_->labels_offset != 0; }
  // Copies row `index` to `destination` (row_bytes()) and returns its label
  // (0 without labels). IoError naming the sample when `index` is outside.
  int64_t copy_row(int64_t index, void* destination) const;
  // Where workers open it: /proc/<this pid>/fd/<fd>.
  std::string proc_path() const;
  uint64_t bytes() const { return bytes_; }
  // The header's digest as 16 hex digits (reading it touches no row).
  std::string digest() const;

 private:
  explicit TensorRows(const SealedMapping& mapping);
  void validate() const;

  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  const TensorRowsHeader* header_ = nullptr;
};

}  // namespace ringloader::data
