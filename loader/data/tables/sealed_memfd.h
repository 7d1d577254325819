// SPDX-License-Identifier: BSD-3-Clause
// A block of bytes the trainer writes once into a memfd, seals against
// writes, growth and shrinking, and every process then maps read-only: the
// sample table (sample_table.h), the tar sample table (tar_sample_table.h)
// and in-memory tensor rows (tensor_rows.h).
// The seals stop the writer from changing what readers have validated; they
// do not make the contents trusted: each reader checks its own format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ringloader::data {

// A read-only mapping of a sealed memfd and the descriptor that keeps it.
// Owned by the table that made or opened it: release() once.
struct SealedMapping {
  int fd = -1;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
};

// Creates a memfd of `bytes` named `memfd_name`, lets `fill` write all of
// it through a writable mapping, unmaps that, seals the memfd (write, grow,
// shrink, seal) and maps it read-only. `what` ("sample table") names it in
// errors. Throws IoError; nothing leaks on failure.
SealedMapping create_sealed_memfd(const char* memfd_name, const std::string& what,
                                  size_t bytes, const std::function<void(uint8_t*)>& fill);

// Opens another process's memfd by `path` (/proc/<pid>/fd/<n>), refuses it
// unless sealed against writes, growth and shrinking and at least
// `min_bytes` long, and maps it read-only. Throws IoError
// "ringloader: <what> <path>: <reason>".
SealedMapping open_sealed_memfd(const std::string& path, const std::string& what,
                                size_t min_bytes);

// Unmaps and closes (either may be absent).
void release(const SealedMapping& mapping);

// Where another process of this user opens `fd` of this process:
// /proc/<pid>/fd/<fd>.
std::string proc_fd_path(int fd);
// A header's 64-bit digest as 16 hex digits (what state fingerprints and
// descriptions compare).
std::string digest_text(uint64_t digest);

}  // namespace ringloader::data
