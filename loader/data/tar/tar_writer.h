// SPDX-License-Identifier: BSD-3-Clause
// Writes tar archives in the layout tar shards are read in: ustar headers,
// GNU long-name members for names over 100 bytes, fixed mtime and owner so
// the same input gives byte-identical shards. The archive is written under
// a random name beside `path` and renamed into place by close()
// (atomic_file.h): no reader sees half a shard, and nothing planted at a
// name in a shared folder is written through.
#pragma once

#include <cstdint>
#include <string>

#include "loader/data/atomic_file.h"

namespace ringloader::data {

class TarWriter {
 public:
  explicit TarWriter(const std::string& path);  // throws IoError
  // Without close(): nothing is written at `path` (the temporary goes).
  ~TarWriter();
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  void add(const std::string& name, const void* data, uint64_t size);
  // Writes the two zero blocks that end an archive and renames the archive
  // into place; throws IoError.
  void close();
  uint64_t bytes_written() const { return written_; }

 private:
  void write(const void* data, uint64_t size);
  AtomicFile file_;
  uint64_t written_ = 0;
};

}  // namespace ringloader::data
