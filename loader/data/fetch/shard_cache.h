// SPDX-License-Identifier: BSD-3-Clause
// Folder loader/data/fetch/: where a shard's bytes come from. A file or a
// pipe: command's output (shard_input), fetched once per node into the
// on-disk cache (this file; its folder's checks and upkeep in
// shard_cache_folder) ahead of the epoch's order (shard_prefetcher).
//
// A node-local, bounded on-disk cache of tar shards, shared by every worker
// process and every loader that names the same folder: each shard (a
// pipe: command's output, or a local file on a slow file system) is fetched
// once per node and then read with pread like a local shard.
//
// Folder layout (all names derived from the URL, so processes agree):
//   <name>.shard  a complete, verified copy (appears only by rename)
//   <name>.part   the copy being fetched (only the holder of the lock writes)
//   <name>.err    the command's stderr while it is fetched
//   <name>.lock   flock: exclusive while fetching, so one process fetches a
//                 shard and the others wait for it; shared while a reader
//                 has the copy open, so it is not evicted under its reader
//                 (the evictor takes it exclusively, without waiting)
//   .evict.lock   flock: one upkeep pass (eviction, leftovers) at a time
// A copy is used only after the command exited 0, the bytes were fsynced,
// the tar walked to its end block (and its size matched the index when the
// index knows it), and the rename into place: nothing half-written is ever
// read as a shard. LRU: a copy's mtime is its last use; when the folder
// holds more than limit_bytes, the oldest copies that no reader holds open
// are deleted (so the folder can exceed the limit by the copies in use;
// a reader closing a copy runs the pass again). A full disk (ENOSPC,
// EDQUOT) while fetching evicts unused copies until the shard fits, then
// fetches again at once; it fails only when nothing is left to evict.
// A .part (and .err) whose lock no fetcher holds was left by a killed one:
// the next upkeep pass, or the next fetch of that shard, removes it.
// The folder must be this user's and writable by no one else
// (shard_cache_folder.h); every file is opened O_NOFOLLOW, .part and .err
// O_EXCL after removing what was there.
//
// Thread-safety: all methods may be called from any thread and process.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loader/data/fetch/shard_input.h"

namespace ringloader::data {

class CacheFolder;

struct ShardCacheOptions {
  std::string dir;                  // empty: no cache
  uint64_t limit_bytes = 16ull << 30;
  int prefetch_shards = 2;          // shards fetched ahead of the epoch order
  bool cache_local = false;         // cache local paths too, not only pipe:
  int fetch_attempts = 3;           // tries per fetch before the error
  double retry_backoff_s = 0.2;     // first wait; x4 per further try
  // A private folder's owner (private_cache_dir.h), kept alive by every
  // copy of these options in this process; never serialized.
  std::shared_ptr<const void> owner;

  bool enabled() const { return !dir.empty(); }
};

class ShardCache {
 public:
  // Creates the folder (and its parents), checks who may write it
  // (shard_cache_folder.h) and removes what killed fetchers left. Throws
  // IoError when it cannot or must not use the folder, or OptionError for a
  // bad limit / attempts.
  explicit ShardCache(ShardCacheOptions options);
  ~ShardCache();

  const ShardCacheOptions& options() const { return options_; }
  // Whether `url` goes through the cache (pipe: always, local if cache_local).
  bool caches(const std::string& url) const;

  // The cached copy of `url`, open for reading, fetched first if absent
  // (other processes fetching it are waited for). While the returned input
  // lives, the copy is not evicted. `expected_bytes` (0:
  // unknown) is the shard's size from the index. Throws IoError naming the
  // shard, the command's exit status and the end of its stderr once
  // fetch_attempts tries failed or were cut short.
  std::shared_ptr<FileInput> open(const std::string& url, uint64_t expected_bytes);
  // Fetches `url` unless it is cached; returns whether it fetched.
  bool prefetch(const std::string& url, uint64_t expected_bytes);
  // Any thread: ends the commands this object's fetches are running
  // (SIGTERM to their groups) and fails its fetches from now on (IoError),
  // so an owner being destroyed (a dataset dropped mid-index) never waits
  // for a stalled command.
  void abandon();

  // File name stem of `url` in the folder: "<fnv64 hex>-<tail of url>".
  static std::string name_for(const std::string& url);

  // This process's figures.
  int64_t fetches() const { return fetches_.load(std::memory_order_relaxed); }
  uint64_t bytes_fetched() const { return bytes_fetched_.load(std::memory_order_relaxed); }
  int64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  // .part files of killed fetchers removed by this cache's passes/fetches.
  int64_t stale_parts_removed() const;

 private:
  // Opens the complete copy, touching its mtime (LRU); -1 when absent.
  int open_cached(const std::string& url) const;
  // The shard's lock file, open (not locked).
  int open_lock(const std::string& url) const;
  // Under the shard's exclusive lock: fetched copy's fd, retrying.
  int fetch_locked(const std::string& url, uint64_t expected_bytes);
  // One try: command -> .part -> verify -> fsync -> rename. Returns the
  // bytes, throws IoError with what went wrong (DiskFull, in the .cc, for
  // a full disk).
  uint64_t fetch_once(const std::string& url, uint64_t expected_bytes);

  // The commands of fetches in progress (abandon()).
  void track(PipeInput* input, bool add);

  ShardCacheOptions options_;
  std::mutex active_mutex_;
  std::vector<PipeInput*> active_;
  std::atomic<bool> abandoned_{false};
  // Shared with the deleters of the copies handed out, which may outlive us.
  std::shared_ptr<CacheFolder> folder_;
  std::atomic<int64_t> fetches_{0};
  std::atomic<uint64_t> bytes_fetched_{0};
  std::atomic<int64_t> hits_{0};
};

}  // namespace ringloader::data
