// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/fetch/shard_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "loader/data/fd.h"
#include "loader/data/fetch/shard_cache_folder.h"
#include "loader/data/tar/tar_walk.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr size_t kStderrTail = 600;
const char kShard[] = ".shard";
constexpr size_t kBufferBytes = 1 << 20;  // one read from the command

std::string errno_text() { return std::strerror(errno); }

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

void flock_retrying(int fd, int operation) {
  while (flock(fd, operation) != 0) {
    if (errno != EINTR) throw IoError("ringloader: flock: " + errno_text());
  }
}

// The disk (or the user's quota) is full: room can be made by evicting.
class DiskFull : public IoError {
 public:
  DiskFull(const std::string& what, uint64_t bytes_needed)
      : IoError(what), bytes_needed_(bytes_needed) {}
  uint64_t bytes_needed() const { return bytes_needed_; }

 private:
  uint64_t bytes_needed_;
};

bool disk_full(int error) { return error == ENOSPC || error == EDQUOT; }

void write_all(int fd, const uint8_t* data, size_t n, const std::string& what) {
  while (n > 0) {
    ssize_t put = ::write(fd, data, n);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && disk_full(errno)) {
      throw DiskFull("cannot write " + what + ": " + errno_text(), 0);
    }
    if (put < 0) throw IoError("cannot write " + what + ": " + errno_text());
    data += put;
    n -= static_cast<size_t>(put);
  }
}

std::string read_tail(const CacheFolder& folder, const std::string& name) {
  Fd fd(folder.open(name, O_RDONLY));
  if (fd.fd < 0) return "";
  struct stat info {};
  fstat(fd.fd, &info);
  off_t from = std::max<off_t>(0, info.st_size - static_cast<off_t>(kStderrTail));
  std::string text(static_cast<size_t>(info.st_size - from), '\0');
  ssize_t got = pread(fd.fd, text.data(), text.size(), from);
  text.resize(got > 0 ? static_cast<size_t>(got) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

ShardCache::ShardCache(ShardCacheOptions options) : options_(std::move(options)) {
  if (options_.fetch_attempts < 1) {
    throw OptionError("ringloader: shard cache fetch_attempts must be >= 1");
  }
  if (options_.prefetch_shards < 0) {
    throw OptionError("ringloader: prefetch_shards must be >= 0");
  }
  if (options_.limit_bytes == 0) {
    throw OptionError("ringloader: cache_limit_bytes must be positive");
  }
  while (options_.dir.size() > 1 && options_.dir.back() == '/') options_.dir.pop_back();
  folder_ = std::make_shared<CacheFolder>(options_.dir);
  // What killed fetchers left, and copies over a limit lowered since.
  folder_->upkeep(options_.limit_bytes, "");
}

ShardCache::~ShardCache() = default;

int64_t ShardCache::stale_parts_removed() const { return folder_->stale_parts_removed(); }

bool ShardCache::caches(const std::string& url) const {
  return is_pipe_url(url) || options_.cache_local;
}

std::string ShardCache::name_for(const std::string& url) {
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx",
                static_cast<unsigned long long>(fnv1a(url)));
  // The URL's tail keeps names readable ("...-train-0003.tar").
  std::string tail = url.substr(url.size() > 40 ? url.size() - 40 : 0);
  for (char& c : tail) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (!plain) c = '_';
  }
  return std::string(hash) + "-" + tail;
}

int ShardCache::open_cached(const std::string& url) const {
  int fd = folder_->open(name_for(url) + kShard, O_RDONLY);
  if (fd >= 0) futimens(fd, nullptr);  // its last use, for LRU eviction
  return fd;
}

int ShardCache::open_lock(const std::string& url) const {
  int fd = folder_->open(name_for(url) + ".lock", O_RDWR | O_CREAT);
  if (fd < 0) {
    throw IoError("ringloader: shard cache " + options_.dir + ": " + errno_text());
  }
  return fd;
}

std::shared_ptr<FileInput> ShardCache::open(const std::string& url,
                                            uint64_t expected_bytes) {
  Fd lock(open_lock(url));
  // Shared: waits while another process (or thread) fetches this shard,
  // and keeps the copy from eviction while it is open here.
  flock_retrying(lock.fd, LOCK_SH);
  int fd = open_cached(url);
  if (fd >= 0) {
    hits_.fetch_add(1, std::memory_order_relaxed);
  } else {
    flock_retrying(lock.fd, LOCK_EX);  // one fetcher; the others wait here
    fd = open_cached(url);
    if (fd < 0) fd = fetch_locked(url, expected_bytes);
    else hits_.fetch_add(1, std::memory_order_relaxed);
    flock_retrying(lock.fd, LOCK_SH);  // waiters go on reading
  }
  // (FileInput closes fd itself if it throws; `lock` unlocks on the way out.)
  auto input = std::make_unique<FileInput>(fd, url + " (cached in " + options_.dir + ")");
  const int held = lock.release();
  return std::shared_ptr<FileInput>(
      input.release(), [held, folder = folder_, limit = options_.limit_bytes](FileInput* copy) {
        delete copy;
        close(held);  // releases the shared lock: the copy may be evicted now
        // Copies kept past the limit while in use go now.
        folder->upkeep(limit, "");
      });
}

bool ShardCache::prefetch(const std::string& url, uint64_t expected_bytes) {
  const int64_t before = fetches();
  open(url, expected_bytes);
  return fetches() > before;
}

void ShardCache::abandon() {
  abandoned_.store(true, std::memory_order_release);
  std::lock_guard<std::mutex> lock(active_mutex_);
  for (PipeInput* input : active_) input->abandon();
}

void ShardCache::track(PipeInput* input, bool add) {
  std::lock_guard<std::mutex> lock(active_mutex_);
  if (!add) {
    active_.erase(std::find(active_.begin(), active_.end(), input));
    return;
  }
  active_.push_back(input);
  // abandon() may have run before the command started.
  if (abandoned_.load(std::memory_order_acquire)) input->abandon();
}

int ShardCache::fetch_locked(const std::string& url, uint64_t expected_bytes) {
  std::string last_error;
  for (int attempt = 1; attempt <= options_.fetch_attempts;) {
    if (abandoned_.load(std::memory_order_acquire)) {
      throw IoError("ringloader: shard " + url + ": fetch abandoned (its dataset was dropped)");
    }
    try {
      uint64_t bytes = fetch_once(url, expected_bytes);
      fetches_.fetch_add(1, std::memory_order_relaxed);
      bytes_fetched_.fetch_add(bytes, std::memory_order_relaxed);
      int fd = open_cached(url);  // opened under the lock: eviction waits
      folder_->upkeep(options_.limit_bytes, name_for(url));
      if (fd < 0) throw IoError("cannot open the copy: " + errno_text());
      return fd;
    } catch (const DiskFull& full) {
      last_error = full.what();
      // Each pass that makes room deletes a file, so this ends; a retry
      // after one is not a failed attempt (nothing was wrong with the shard).
      if (folder_->upkeep(options_.limit_bytes, name_for(url), full.bytes_needed()) > 0) {
        continue;
      }
      last_error += " (and no cached copy that no reader holds is left to evict)";
    } catch (const IoError& error) {
      last_error = error.what();
    }
    if (attempt < options_.fetch_attempts) {
      double wait_s = options_.retry_backoff_s;
      for (int i = 1; i < attempt; ++i) wait_s *= 4;
      std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    }
    ++attempt;
  }
  // The URL is named once (messages travel in a 400-byte slot field).
  for (const std::string& prefix : {"ringloader: shard " + url + ": ", "shard " + url + ": "}) {
    if (last_error.compare(0, prefix.size(), prefix) == 0) last_error.erase(0, prefix.size());
  }
  throw IoError("ringloader: cannot fetch shard " + url + " (" +
                std::to_string(options_.fetch_attempts) + " attempts; " + last_error +
                ") into the cache " + options_.dir);
}

uint64_t ShardCache::fetch_once(const std::string& url, uint64_t expected_bytes) {
  const std::string stem = name_for(url);
  const std::string part = stem + ".part", err = stem + ".err";
  const std::string part_path = options_.dir + "/" + part;
  // Under the shard's exclusive lock no one else writes these names: any
  // left are a killed fetcher's. Created anew (O_EXCL, never through a
  // symlink), so a file or link planted there is never written through.
  if (folder_->remove(part)) folder_->count_stale_part();
  folder_->remove(err);
  Fd out(folder_->open(part, O_WRONLY | O_CREAT | O_EXCL));
  if (out.fd < 0) {
    const bool full = disk_full(errno);
    const std::string why = errno_text();
    if (full) {
      throw DiskFull("cannot create " + part_path + ": " + why,
                     std::max<uint64_t>(expected_bytes, 1));
    }
    throw IoError("cannot create " + part_path + ": " + why);
  }
  uint64_t total = 0, read_bytes = 0;
  try {
    Fd err_fd(is_pipe_url(url) ? folder_->open(err, O_WRONLY | O_CREAT | O_EXCL) : -1);
    std::unique_ptr<ShardInput> input;
    PipeInput* command = nullptr;
    if (is_pipe_url(url)) {
      auto pipe = std::make_unique<PipeInput>(url, err_fd.fd);
      command = pipe.get();
      input = std::move(pipe);
    } else {
      input = std::make_unique<FileInput>(url);
    }
    // Untracked before `input` goes: abandon() never reaches a freed one.
    struct Tracked {
      ShardCache* cache;
      PipeInput* input;
      ~Tracked() {
        if (input) cache->track(input, false);
      }
    } tracked{this, command};
    if (command) track(command, true);
    std::vector<uint8_t> buffer(kBufferBytes);
    for (;;) {
      size_t got = input->read(buffer.data(), buffer.size());  // throws on a bad exit
      read_bytes += got;
      write_all(out.fd, buffer.data(), got, part_path);
      total += got;
      if (got < buffer.size()) break;
    }
  } catch (const DiskFull& full) {
    folder_->remove(part);
    folder_->remove(err);
    // Room for the whole shard when the index knows its size, else for
    // what the command gave so far (if it gives more, a later pass evicts
    // more).
    throw DiskFull(full.what(), std::max(expected_bytes, read_bytes));
  } catch (const IoError& error) {
    std::string stderr_text = read_tail(*folder_, err);
    folder_->remove(part);
    folder_->remove(err);
    throw IoError(std::string(error.what()) +
                  (stderr_text.empty() ? "" : "; its stderr ends: " + stderr_text));
  }
  folder_->remove(err);
  auto fail = [&](const std::string& why) {
    folder_->remove(part);
    throw IoError("shard " + url + ": " + why);
  };
  if (expected_bytes > 0 && total != expected_bytes) {
    fail("the command gave " + std::to_string(total) + " bytes, the index has " +
         std::to_string(expected_bytes) + " (cut short or changed)");
  }
  // Verify the structure before anyone can see it: every header, and the
  // end block (a stream cut between two members would pass otherwise).
  bool saw_end = false;
  try {
    FileInput check(folder_->open(part, O_RDONLY), part_path);
    walk_tar(check, url, [](const std::string&) { return false; },
             [](TarMember&&) {}, &saw_end);
  } catch (const IoError& error) {
    fail(std::string("the fetched copy is not a whole tar: ") + error.what());
  }
  if (!saw_end) fail("the fetched copy has no end-of-archive block (cut short)");
  if (fsync(out.fd) != 0) {
    const bool full = disk_full(errno);
    const std::string why = errno_text();
    if (full) {
      folder_->remove(part);
      throw DiskFull("fsync of " + part_path + " failed: " + why, total);
    }
    fail("fsync failed: " + why);
  }
  if (!folder_->rename(part, stem + kShard)) {
    fail("cannot rename the copy into place: " + errno_text());
  }
  folder_->sync();  // the rename survives a crash
  return total;
}

}  // namespace ringloader::data
