// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/fetch/shard_cache_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "loader/data/fd.h"
#include "loader/data/folder_walk.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

const char kShard[] = ".shard";
const char kPart[] = ".part";

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

std::string stem_of(const std::string& name, const char* suffix) {
  return name.substr(0, name.size() - std::strlen(suffix));
}

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The checks that make the folder trustworthy (see the header).
void check_owner_and_mode(const std::string& dir, int fd) {
  const uid_t self = geteuid();
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISDIR(info.st_mode)) {
    throw IoError("ringloader: shard cache " + dir + " is not a folder");
  }
  if (info.st_uid != self) {
    throw IoError("ringloader: shard cache folder " + dir + " is owned by uid " +
                  std::to_string(info.st_uid) + ", not by this process's uid " +
                  std::to_string(self) +
                  ": its owner could plant shards in it. Name a folder of your own "
                  "(created 0700 when missing)");
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw IoError("ringloader: shard cache folder " + dir + " is writable by " +
                  ((info.st_mode & S_IWOTH) ? "others" : "its group") + " (mode " +
                  octal(info.st_mode) +
                  "): they could plant shards or symlinks in it. chmod go-w it, or "
                  "name a folder of your own (created 0700 when missing)");
  }
}

}  // namespace

CacheFolder::CacheFolder(std::string dir) : path_(std::move(dir)) {
  // Walked component by component (folder_walk.h): the folder checked below
  // is the one opened, reached through no folder or symlink another user
  // controls.
  fd_ = open_folder_walking(path_, /*create=*/true, "ringloader: shard cache folder");
  try {
    check_owner_and_mode(path_, fd_);
  } catch (...) {
    close(fd_);
    throw;
  }
}

CacheFolder::~CacheFolder() { close(fd_); }

int CacheFolder::open(const std::string& name, int flags, mode_t mode) const {
  return ::openat(fd_, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
}

bool CacheFolder::remove(const std::string& name) const {
  return unlinkat(fd_, name.c_str(), 0) == 0;
}

bool CacheFolder::rename(const std::string& from, const std::string& to) const {
  return renameat(fd_, from.c_str(), fd_, to.c_str()) == 0;
}

void CacheFolder::sync() const { fsync(fd_); }

uint64_t CacheFolder::free_bytes() const {
  struct statvfs info {};
  if (fstatvfs(fd_, &info) != 0) return 0;
  return static_cast<uint64_t>(info.f_bavail) * info.f_frsize;
}

int CacheFolder::remove_if_stale(const std::string& stem) {
  // A fetcher holds the lock exclusively from before it creates the .part
  // until it renames or removes it; holding it shared here keeps one from
  // starting (created if missing, as a fetcher would, so that one starting
  // now waits for us too).
  Fd lock(open(stem + ".lock", O_RDWR | O_CREAT));
  if (lock.fd < 0 || flock(lock.fd, LOCK_SH | LOCK_NB) != 0) return 0;
  int removed = 0;
  if (remove(stem + kPart)) {
    ++removed;
    count_stale_part();
  }
  if (remove(stem + ".err")) ++removed;
  return removed;
}

int CacheFolder::upkeep(uint64_t limit_bytes, const std::string& keep,
                        uint64_t free_bytes_needed) {
  Fd guard(open(".evict.lock", O_RDWR | O_CREAT));
  if (guard.fd < 0) return 0;
  while (flock(guard.fd, LOCK_EX) != 0) {
    if (errno != EINTR) return 0;
  }
  struct Copy {
    std::string stem;
    uint64_t bytes;
    int64_t used_ns;
  };
  std::vector<Copy> copies;
  std::vector<std::string> leftovers;
  uint64_t total = 0;
  const int listing = open(".", O_RDONLY | O_DIRECTORY);
  DIR* dir = listing >= 0 ? fdopendir(listing) : nullptr;
  if (!dir) {
    if (listing >= 0) close(listing);
    return 0;
  }
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (ends_with(name, kPart)) leftovers.push_back(stem_of(name, kPart));
    if (ends_with(name, ".err")) leftovers.push_back(stem_of(name, ".err"));
    if (!ends_with(name, kShard)) continue;
    struct stat info {};
    if (fstatat(fd_, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) continue;
    copies.push_back({stem_of(name, kShard), static_cast<uint64_t>(info.st_size),
                      info.st_mtim.tv_sec * 1'000'000'000LL + info.st_mtim.tv_nsec});
    total += static_cast<uint64_t>(info.st_size);
  }
  closedir(dir);
  std::sort(leftovers.begin(), leftovers.end());
  leftovers.erase(std::unique(leftovers.begin(), leftovers.end()), leftovers.end());
  int removed = 0;
  for (const std::string& stem : leftovers) removed += remove_if_stale(stem);
  std::sort(copies.begin(), copies.end(),
            [](const Copy& a, const Copy& b) { return a.used_ns < b.used_ns; });
  for (const Copy& copy : copies) {
    const bool room = free_bytes_needed == 0 || free_bytes() >= free_bytes_needed;
    if (total <= limit_bytes && room) break;
    if (copy.stem == keep) continue;
    // Held shared by every reader that has the copy open (and exclusively by
    // a fetcher): such a copy stays.
    Fd lock(open(copy.stem + ".lock", O_RDWR));
    if (lock.fd < 0 || flock(lock.fd, LOCK_EX | LOCK_NB) != 0) continue;
    if (remove(copy.stem + kShard)) {
      total -= copy.bytes;
      ++removed;
    }
  }
  return removed;
}

}  // namespace ringloader::data
