// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/file_trust.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ringloader::data {
namespace {

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The owner and write bits that let someone other than us (and root)
// change `what` ("it", "its folder /data").
std::string why_not_ours(const struct stat& info, const std::string& what, bool folder) {
  const uid_t self = geteuid();
  if (info.st_uid != self && info.st_uid != 0) {
    return what + " is owned by uid " + std::to_string(info.st_uid) + ", neither this "
           "process's uid (" + std::to_string(self) + ") nor root";
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) == 0) return "";
  // In a sticky folder others may add entries but not replace ours.
  if (folder && (info.st_mode & S_ISVTX) != 0) return "";
  return what + " is writable by " + ((info.st_mode & S_IWOTH) ? "others" : "its group") +
         " (mode " + octal(info.st_mode) + ")";
}

}  // namespace

std::string why_file_is_untrusted(int fd) {
  struct stat info {};
  if (fstat(fd, &info) != 0) return "cannot stat it: " + std::string(std::strerror(errno));
  if (!S_ISREG(info.st_mode)) return "it is not a regular file";
  std::string why = why_not_ours(info, "it", false);
  if (!why.empty()) return why;
  // The folders of the file actually open, whatever symlinks `name` went
  // through: whoever may rename in one of them may swap the file.
  char path[PATH_MAX + 1];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t length = readlink(link.c_str(), path, PATH_MAX);
  if (length <= 0 || path[0] != '/') return "cannot find its folder (" + link + ")";
  std::string folder(path, static_cast<size_t>(length));
  while (folder.size() > 1) {
    folder.resize(folder.rfind('/') == 0 ? 1 : folder.rfind('/'));
    struct stat parent {};
    if (stat(folder.c_str(), &parent) != 0) {
      return "cannot stat its folder " + folder + ": " + std::strerror(errno);
    }
    why = why_not_ours(parent, "its folder " + folder, true);
    if (!why.empty()) return why;
  }
  return "";
}

}  // namespace ringloader::data
