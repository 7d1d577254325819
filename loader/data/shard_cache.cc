// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/shard_cache.h"

#include <dirent.h>
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

#include "loader/data/tar_walk.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr size_t kStderrTail = 600;
const char kShard[] = ".shard";

std::string errno_text() { return std::strerror(errno); }

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// Closes a descriptor (and with it its flock) when the scope ends.
struct Fd {
  int fd = -1;
  explicit Fd(int value) : fd(value) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int release() { return std::exchange(fd, -1); }
};

void make_dirs(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    std::string part = dir.substr(0, at);
    if (mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) {
      throw IoError("ringloader: cannot create the shard cache folder " + dir + ": " +
                    errno_text());
    }
  }
  struct stat info {};
  if (stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    throw IoError("ringloader: shard cache " + dir + " is not a folder");
  }
}

void flock_retrying(int fd, int operation) {
  while (flock(fd, operation) != 0) {
    if (errno != EINTR) throw IoError("ringloader: flock: " + errno_text());
  }
}

void write_all(int fd, const uint8_t* data, size_t n, const std::string& what) {
  while (n > 0) {
    ssize_t put = ::write(fd, data, n);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) throw IoError("cannot write " + what + ": " + errno_text());
    data += put;
    n -= static_cast<size_t>(put);
  }
}

std::string read_tail(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
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
  make_dirs(options_.dir);
}

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

std::string ShardCache::path(const std::string& url, const char* suffix) const {
  return options_.dir + "/" + name_for(url) + suffix;
}

int ShardCache::open_cached(const std::string& url) const {
  int fd = ::open(path(url, kShard).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) futimens(fd, nullptr);  // its last use, for LRU eviction
  return fd;
}

int ShardCache::open_lock(const std::string& url) const {
  int fd = ::open(path(url, ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
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
      input.release(), [held, options = options_](FileInput* copy) {
        delete copy;
        close(held);  // releases the shared lock: the copy may be evicted now
        // Copies kept past the limit while in use go now.
        evict(options, "");
      });
}

bool ShardCache::prefetch(const std::string& url, uint64_t expected_bytes) {
  const int64_t before = fetches();
  open(url, expected_bytes);
  return fetches() > before;
}

int ShardCache::fetch_locked(const std::string& url, uint64_t expected_bytes) {
  std::string last_error;
  for (int attempt = 1; attempt <= options_.fetch_attempts; ++attempt) {
    try {
      uint64_t bytes = fetch_once(url, expected_bytes);
      fetches_.fetch_add(1, std::memory_order_relaxed);
      bytes_fetched_.fetch_add(bytes, std::memory_order_relaxed);
      int fd = open_cached(url);  // opened under the lock: eviction waits
      evict(options_, name_for(url));
      if (fd < 0) throw IoError("cannot open the copy: " + errno_text());
      return fd;
    } catch (const IoError& error) {
      last_error = error.what();
    }
    if (attempt < options_.fetch_attempts) {
      double wait_s = options_.retry_backoff_s;
      for (int i = 1; i < attempt; ++i) wait_s *= 4;
      std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    }
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
  const std::string part = path(url, ".part");
  const std::string err = path(url, ".err");
  Fd out(::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (out.fd < 0) throw IoError("cannot create " + part + ": " + errno_text());
  uint64_t total = 0;
  try {
    Fd err_fd(is_pipe_url(url)
                  ? ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)
                  : -1);
    std::unique_ptr<ShardInput> input;
    if (is_pipe_url(url)) input = std::make_unique<PipeInput>(url, err_fd.fd);
    else input = std::make_unique<FileInput>(url);
    std::vector<uint8_t> buffer(1 << 20);
    for (;;) {
      size_t got = input->read(buffer.data(), buffer.size());  // throws on a bad exit
      write_all(out.fd, buffer.data(), got, part);
      total += got;
      if (got < buffer.size()) break;
    }
  } catch (const IoError& error) {
    std::string stderr_text = read_tail(err);
    unlink(part.c_str());
    unlink(err.c_str());
    throw IoError(std::string(error.what()) +
                  (stderr_text.empty() ? "" : "; its stderr ends: " + stderr_text));
  }
  unlink(err.c_str());
  auto fail = [&](const std::string& why) {
    unlink(part.c_str());
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
    FileInput check(part);
    walk_tar(check, url, [](const std::string&) { return false; },
             [](TarMember&&) {}, &saw_end);
  } catch (const IoError& error) {
    fail(std::string("the fetched copy is not a whole tar: ") + error.what());
  }
  if (!saw_end) fail("the fetched copy has no end-of-archive block (cut short)");
  if (fsync(out.fd) != 0) fail("fsync failed: " + errno_text());
  if (rename(part.c_str(), path(url, kShard).c_str()) != 0) {
    fail("cannot rename the copy into place: " + errno_text());
  }
  Fd dir(::open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.fd >= 0) fsync(dir.fd);  // the rename survives a crash
  return total;
}

// Deletes least recently used copies until the folder fits the limit.
// A copy whose lock is held (being fetched, or open in a reader) is
// skipped; `keep` (just fetched) too.
void ShardCache::evict(const ShardCacheOptions& options_, const std::string& keep) {
  Fd guard(::open((options_.dir + "/.evict.lock").c_str(),
                  O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  if (guard.fd < 0) return;
  flock_retrying(guard.fd, LOCK_EX);
  struct Copy {
    std::string stem;
    uint64_t bytes;
    int64_t used_ns;
  };
  std::vector<Copy> copies;
  uint64_t total = 0;
  DIR* dir = opendir(options_.dir.c_str());
  if (!dir) return;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (!ends_with(name, kShard)) continue;
    struct stat info {};
    if (stat((options_.dir + "/" + name).c_str(), &info) != 0) continue;
    std::string stem = name.substr(0, name.size() - (sizeof(kShard) - 1));
    copies.push_back({stem, static_cast<uint64_t>(info.st_size),
                      info.st_mtim.tv_sec * 1'000'000'000LL + info.st_mtim.tv_nsec});
    total += static_cast<uint64_t>(info.st_size);
  }
  closedir(dir);
  std::sort(copies.begin(), copies.end(),
            [](const Copy& a, const Copy& b) { return a.used_ns < b.used_ns; });
  for (const Copy& copy : copies) {
    if (total <= options_.limit_bytes) break;
    if (copy.stem == keep) continue;
    Fd lock(::open((options_.dir + "/" + copy.stem + ".lock").c_str(),
                   O_RDWR | O_CLOEXEC));
    if (lock.fd < 0 || flock(lock.fd, LOCK_EX | LOCK_NB) != 0) continue;
    if (unlink((options_.dir + "/" + copy.stem + kShard).c_str()) == 0) total -= copy.bytes;
  }
}

}  // namespace ringloader::data
