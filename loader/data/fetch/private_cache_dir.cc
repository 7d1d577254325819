// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/fetch/private_cache_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr char kPrefix[] = "ringloader-shards-";
constexpr char kOwner[] = ".owner";

// Removes the files of folder `name` (in `parent_fd`), then the folder.
// Never follows a link: the folder is opened O_NOFOLLOW and must be this
// euid's, and entries are unlinked, not opened.
void remove_tree_at(int parent_fd, const std::string& name) {
  const int fd = openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  struct stat info {};
  if (fstat(fd, &info) != 0 || info.st_uid != geteuid()) {
    close(fd);
    return;
  }
  DIR* dir = fdopendir(fd);
  if (!dir) {
    close(fd);
    return;
  }
  std::vector<std::string> names;
  while (dirent* entry = readdir(dir)) {
    const std::string entry_name = entry->d_name;
    if (entry_name != "." && entry_name != "..") names.push_back(entry_name);
  }
  for (const std::string& entry_name : names) unlinkat(dirfd(dir), entry_name.c_str(), 0);
  closedir(dir);
  unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR);
}

void remove_tree(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  const int parent_fd = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent_fd < 0) return;
  remove_tree_at(parent_fd, path.substr(slash + 1));
  close(parent_fd);
}

// Folders still to remove at exit (a dataset Python never collected).
// Leaked on purpose: destructors of other statics may still reach it.
struct Registry {
  std::mutex mutex;
  std::set<std::string> paths;
  pid_t pid = 0;  // the process that registered them
};

Registry& registry() {
  static Registry* registry = new Registry;
  return *registry;
}

void remove_at_exit() {
  Registry& live = registry();
  std::lock_guard<std::mutex> lock(live.mutex);
  if (live.pid != getpid()) return;  // a forked child's exit
  for (const std::string& path : live.paths) remove_tree(path);
  live.paths.clear();
}

}  // namespace

std::string PrivateCacheDir::base_dir() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string base = tmpdir && tmpdir[0] == '/' ? tmpdir : "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return base;
}

std::shared_ptr<PrivateCacheDir> PrivateCacheDir::create() {
  const std::string base = base_dir();
  sweep(base);
  std::string path = base + "/" + kPrefix + "XXXXXX";
  if (!mkdtemp(path.data())) {  // 0700
    throw IoError("ringloader: cannot make a private shard cache folder in " + base + ": " +
                  std::strerror(errno) + " (set TMPDIR, or pass cache_dir)");
  }
  // Locked before it takes its name, so a sweeper never sees it free.
  const std::string owner = path + "/" + kOwner;
  const std::string making = owner + ".new";
  const int fd = open(making.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || flock(fd, LOCK_EX) != 0 || rename(making.c_str(), owner.c_str()) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    remove_tree(path);
    throw IoError("ringloader: cannot lock " + owner + ": " + std::strerror(error));
  }
  {
    Registry& live = registry();
    std::lock_guard<std::mutex> lock(live.mutex);
    if (live.pid != getpid()) {
      live.pid = getpid();
      live.paths.clear();  // a forked child's inherited list is not its own
      static const bool registered = std::atexit(remove_at_exit) == 0;
      (void)registered;
    }
    live.paths.insert(path);
  }
  return std::shared_ptr<PrivateCacheDir>(new PrivateCacheDir(std::move(path), fd));
}

PrivateCacheDir::PrivateCacheDir(std::string path, int lock_fd)
    : path_(std::move(path)), creator_(getpid()), lock_fd_(lock_fd) {}

PrivateCacheDir::~PrivateCacheDir() {
  if (getpid() == creator_) {
    Registry& live = registry();
    std::lock_guard<std::mutex> lock(live.mutex);
    if (live.paths.erase(path_)) remove_tree(path_);
  }
  close(lock_fd_);
}

uint64_t PrivateCacheDir::bounded_limit(uint64_t limit) const {
  constexpr uint64_t kFloor = uint64_t{64} << 20;
  struct statvfs fs {};
  if (statvfs(path_.c_str(), &fs) != 0) return std::min(limit, kFloor);
  const uint64_t half_free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize / 2;
  return std::max(std::min(limit, half_free), kFloor);
}

int PrivateCacheDir::sweep(const std::string& base) {
  const int base_fd = open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (base_fd < 0) return 0;
  std::vector<std::string> candidates;
  if (DIR* dir = fdopendir(dup(base_fd))) {
    while (dirent* entry = readdir(dir)) {
      if (std::strncmp(entry->d_name, kPrefix, sizeof(kPrefix) - 1) == 0) {
        candidates.emplace_back(entry->d_name);
      }
    }
    closedir(dir);
  }
  int removed = 0;
  for (const std::string& name : candidates) {
    struct stat info {};
    if (fstatat(base_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISDIR(info.st_mode) || info.st_uid != geteuid()) {
      continue;
    }
    const std::string owner = name + "/" + kOwner;
    const int fd = openat(base_fd, owner.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    // No .owner: a folder being made right now, or not one of ours.
    if (fd < 0) continue;
    const bool dead = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (dead) {
      remove_tree_at(base_fd, name);
      ++removed;
    }
    close(fd);
  }
  close(base_fd);
  return removed;
}

}  // namespace ringloader::data
