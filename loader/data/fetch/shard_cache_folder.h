// SPDX-License-Identifier: BSD-3-Clause
// The shard cache's folder (shard_cache.h has its layout): opened and
// checked once, then every file in it is reached relative to that
// descriptor and never through a symlink; and its upkeep, LRU eviction and
// the removal of what killed fetchers left behind.
//
// Trust: every loader that names the folder reads its copies as shards, so
// whoever can write into it can plant a shard (poisoned samples) or a
// symlink (to make the fetcher write, or the evictor delete, elsewhere).
// The folder must therefore belong to this process's effective uid and be
// writable by no one else (no group or other write bit, sticky or not), and
// be reached through folders that are this uid's or root's and writable by
// no one else unless sticky (as /tmp), and through no symlink another user
// owns: it is opened component by component with O_NOFOLLOW
// (folder_walk.h), so the folder checked is the folder used. A
// missing folder is created 0700; files in it are created 0600, so others
// cannot read cached shards even where the folder is 0755. Anything else is
// refused with an IoError naming the folder. A cache shared by several
// users is not supported: each user names a folder of their own.
//
// Thread-safety: all methods may be called from any thread and process.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace ringloader::data {

class CacheFolder {
 public:
  // Creates `dir` (missing parents 0755, the folder itself 0700) and opens
  // it. Throws IoError naming `dir` when it cannot be made or opened, when
  // it is another user's or writable by group or others, or when the path
  // passes through a symlink another user owns or a folder another user
  // owns or may write (unless sticky).
  explicit CacheFolder(std::string dir);
  ~CacheFolder();
  CacheFolder(const CacheFolder&) = delete;
  CacheFolder& operator=(const CacheFolder&) = delete;

  const std::string& path() const { return path_; }
  // openat in the folder, with O_NOFOLLOW | O_CLOEXEC added: -1 and errno
  // when it fails (ELOOP for a symlink).
  int open(const std::string& name, int flags, mode_t mode = 0600) const;
  // Whether `name` existed and is gone now.
  bool remove(const std::string& name) const;
  // renameat within the folder; false and errno when it fails.
  bool rename(const std::string& from, const std::string& to) const;
  // fsync of the folder itself: its renames survive a crash.
  void sync() const;

  // One upkeep pass (one at a time per folder, across processes): removes
  // the .part / .err files of fetches no process runs any more, then
  // deletes least recently used copies that no reader holds open (never
  // `keep`, a name stem) until the copies fit `limit_bytes` and, when
  // `free_bytes_needed` > 0, until the disk has that many bytes free.
  // Returns the files it removed.
  int upkeep(uint64_t limit_bytes, const std::string& keep, uint64_t free_bytes_needed = 0);
  // A fetcher found (and removed) a .part a killed fetcher left.
  void count_stale_part() { stale_parts_.fetch_add(1, std::memory_order_relaxed); }
  // Stale .part files removed through this object.
  int64_t stale_parts_removed() const { return stale_parts_.load(std::memory_order_relaxed); }

 private:
  uint64_t free_bytes() const;
  // Removes `stem`'s .part and .err unless a fetcher holds its lock.
  int remove_if_stale(const std::string& stem);

  std::string path_;
  int fd_ = -1;
  std::atomic<int64_t> stale_parts_{0};
};

}  // namespace ringloader::data
