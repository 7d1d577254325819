// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/folder_walk.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>

#include "loader/data/fd.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr int kMaxSymlinks = 40;  // the kernel's own limit (ELOOP)

std::deque<std::string> components(const std::string& path) {
  std::deque<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (slash > start) out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

std::string joined(const std::string& folder, const std::string& name) {
  return folder == "/" ? "/" + name : folder + "/" + name;
}

std::string owner_text(uid_t uid) {
  return "uid " + std::to_string(uid) + " (neither this process's uid " +
         std::to_string(geteuid()) + " nor root)";
}

// Why another user could change what `path` (a folder passed through)
// holds, or "".
std::string why_untrusted_folder(const struct stat& info, const std::string& path) {
  if (info.st_uid != geteuid() && info.st_uid != 0) {
    return path + " is owned by " + owner_text(info.st_uid);
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) == 0 || (info.st_mode & S_ISVTX) != 0) return "";
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
  return path + " is writable by " + ((info.st_mode & S_IWOTH) ? "others" : "its group") +
         " and not sticky (mode " + mode + "): they could swap what it holds";
}

}  // namespace

int open_folder_walking(const std::string& dir, bool create, const std::string& what) {
  auto fail = [&](const std::string& why) {
    throw IoError(what + " " + dir + ": " + why + "; name a folder of your own");
  };
  std::string start = dir;
  if (dir.empty() || dir[0] != '/') {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) fail("cannot find the working directory");
    start = std::string(cwd) + "/" + dir;
  }
  std::deque<std::string> rest = components(start);
  std::string walked = "/";  // the real path of `at`: symlinks are expanded
  Fd at(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (at.fd < 0) fail("cannot open /");
  int symlinks = 0, creations = 0;
  while (!rest.empty()) {
    const std::string name = rest.front();
    rest.pop_front();
    if (name == ".") continue;
    const std::string path = name == ".." ? walked.substr(0, std::max<size_t>(1, walked.rfind('/')))
                                          : joined(walked, name);
    struct stat info {};
    if (fstatat(at.fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT || !create || ++creations > 64) {
        fail("cannot open " + path + ": " + std::strerror(errno));
      }
      if (mkdirat(at.fd, name.c_str(), rest.empty() ? 0700 : 0755) != 0 && errno != EEXIST) {
        fail("cannot create " + path + ": " + std::strerror(errno));
      }
      rest.push_front(name);  // made: look again
      continue;
    }
    if (S_ISLNK(info.st_mode)) {
      // Only its owner (and whoever may rename in its folder, checked on
      // the way here) can change where a symlink points.
      if (info.st_uid != geteuid() && info.st_uid != 0) {
        fail(path + " is a symlink owned by " + owner_text(info.st_uid));
      }
      char target[PATH_MAX + 1];
      const ssize_t length = readlinkat(at.fd, name.c_str(), target, PATH_MAX);
      if (length <= 0 || ++symlinks > kMaxSymlinks) fail("cannot follow the symlink " + path);
      const std::string to(target, static_cast<size_t>(length));
      std::deque<std::string> more = components(to);
      rest.insert(rest.begin(), more.begin(), more.end());
      if (to[0] == '/') {
        at = Fd(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        walked = "/";
      }
      continue;
    }
    if (!S_ISDIR(info.st_mode)) fail(path + " is not a folder");
    Fd next(openat(at.fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat opened {};
    if (next.fd < 0 || fstat(next.fd, &opened) != 0) {
      fail("cannot open " + path + ": " + std::strerror(errno));
    }
    // The folders before the last: the caller checks the last one its way.
    if (!rest.empty()) {
      const std::string why = why_untrusted_folder(opened, path);
      if (!why.empty()) fail(why);
    }
    at = std::move(next);
    walked = path;
  }
  return at.release();
}

}  // namespace ringloader::data
