// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/atomic_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "loader/data/fd.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

// A name no other process can guess: 64 random bits, as mkstemp's six
// characters are not enough against a folder full of planted names.
std::string random_name(const std::string& base) {
  uint64_t bits = 0;
  ssize_t got;
  do {
    got = getrandom(&bits, sizeof bits, 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof bits)) {
    throw IoError("ringloader: getrandom failed: " + std::string(std::strerror(errno)));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
  // NAME_MAX is 255: the base is cut so that the name always fits.
  return "." + base.substr(0, 200) + "." + hex + ".tmp";
}

}  // namespace

AtomicFile::AtomicFile(std::string path, mode_t mode) : path_(std::move(path)) {
  buffer_.reserve(kBufferBytes);
  const size_t slash = path_.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
  base_ = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  if (base_.empty() || base_ == "." || base_ == "..") fail("not a file name");
  Fd folder_fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (folder_fd.fd < 0) fail("cannot open its folder: " + std::string(std::strerror(errno)));
  // O_EXCL | O_NOFOLLOW: a name someone else made first, file or symlink,
  // is never opened; another random name is tried.
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temporary_ = random_name(base_);
    fd_ = openat(folder_fd.fd, temporary_.c_str(),
                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd_ < 0 && (errno != EEXIST || attempt == 16)) {
      fail("cannot create a temporary file in its folder: " + std::string(std::strerror(errno)));
    }
  }
  folder_ = folder_fd.release();
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    close(fd_);
    unlinkat(folder_, temporary_.c_str(), 0);
  }
  if (folder_ >= 0) close(folder_);
}

void AtomicFile::fail(const std::string& what) const {
  throw IoError("ringloader: cannot write " + path_ + ": " + what);
}

void AtomicFile::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t wrote = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) fail(std::strerror(wrote < 0 ? errno : EIO));
    done += static_cast<size_t>(wrote);
  }
  buffer_.clear();
}

void AtomicFile::write(const void* data, uint64_t size) {
  if (fd_ < 0) fail("written after commit");
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const uint64_t room = kBufferBytes - buffer_.size();
    const uint64_t take = size < room ? size : room;
    buffer_.insert(buffer_.end(), bytes, bytes + take);
    bytes += take;
    size -= take;
    if (buffer_.size() == kBufferBytes) flush();
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) fail("committed twice");
  flush();
  // The data reaches the disk before the name does: a crash leaves the old
  // file or the new one, never an empty new one.
  if (fsync(fd_) != 0) fail("fsync: " + std::string(std::strerror(errno)));
  if (close(std::exchange(fd_, -1)) != 0) {
    unlinkat(folder_, temporary_.c_str(), 0);
    fail(std::strerror(errno));
  }
  if (renameat(folder_, temporary_.c_str(), folder_, base_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlinkat(folder_, temporary_.c_str(), 0);
    fail("cannot rename " + temporary_ + " into place: " + why);
  }
  fsync(folder_);
}

void write_file_atomically(const std::string& path, const std::string& text, mode_t mode) {
  AtomicFile file(path, mode);
  file.write(text);
  file.commit();
}

}  // namespace ringloader::data
