// SPDX-License-Identifier: BSD-3-Clause
// The shard cache a TarShards dataset of pipe: shards gets when the user
// names no cache_dir (TarShardOptions::private_cache): a folder only this
// process made, so each remote shard is fetched once per epoch at most and
// workers read local copies instead of restarting commands.
//
// Where: "$TMPDIR/ringloader-shards-XXXXXX" (else /tmp), made by mkdtemp
// (mode 0700, so the ShardCache folder checks hold; copies are 0600).
// Lifetime: the folder and its files are removed when the last owner of
// the PrivateCacheDir goes (the dataset, and the Loaders that read it), or
// at the process's normal exit. A process killed outright (kill -9) cannot
// remove anything: its folder keeps a `.owner` file locked (flock) while
// the process lives, and the next private cache made by this user removes
// every sibling folder of theirs whose lock no one holds.
// Only the process that made the folder removes it (a forked child that
// drops its copy of the dataset does not).
//
// Thread-safety: create() and the destructor may run on any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace ringloader::data {

class PrivateCacheDir {
 public:
  // Makes the folder (and sweeps dead siblings). Throws IoError naming the
  // base folder when it cannot.
  static std::shared_ptr<PrivateCacheDir> create();
  ~PrivateCacheDir();
  PrivateCacheDir(const PrivateCacheDir&) = delete;
  PrivateCacheDir& operator=(const PrivateCacheDir&) = delete;

  const std::string& path() const { return path_; }
  // Half the free space of the folder's file system now, at most `limit`
  // (and at least 64 MiB): a default cache must not fill the disk.
  uint64_t bounded_limit(uint64_t limit) const;

  // Removes `base`/ringloader-shards-* folders owned by this euid whose
  // owner process is gone (their .owner lock is free). Returns how many.
  static int sweep(const std::string& base);
  // Where folders are made: $TMPDIR when absolute, else /tmp.
  static std::string base_dir();

 private:
  PrivateCacheDir(std::string path, int lock_fd);
  std::string path_;
  pid_t creator_;
  int lock_fd_;
};

}  // namespace ringloader::data
