// SPDX-License-Identifier: BSD-3-Clause
// Writes tar archives in the layout tar shards are read in: ustar headers,
// GNU long-name members for names over 100 bytes, fixed mtime and owner so
// the same input gives byte-identical shards.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace ringloader::data {

class TarWriter {
 public:
  explicit TarWriter(const std::string& path);  // throws IoError
  ~TarWriter();                                  // closes if close() was not called
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  void add(const std::string& name, const void* data, uint64_t size);
  // Writes the two zero blocks that end an archive; throws IoError.
  void close();
  uint64_t bytes_written() const { return written_; }

 private:
  void write(const void* data, uint64_t size);
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t written_ = 0;
};

}  // namespace ringloader::data
