// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tables/sealed_memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr int kNeededSeals = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;

[[noreturn]] void fail_creating(const std::string& what, const std::string& step, int fd) {
  const int error = errno;
  if (fd >= 0) close(fd);
  throw IoError("ringloader: " + what + ": " + step + ": " + std::strerror(error));
}

[[noreturn]] void fail_opening(const std::string& what, const std::string& path,
                               const std::string& why, int fd) {
  if (fd >= 0) close(fd);
  throw IoError("ringloader: " + what + " " + path + ": " + why);
}

}  // namespace

SealedMapping create_sealed_memfd(const char* memfd_name, const std::string& what,
                                  size_t bytes, const std::function<void(uint8_t*)>& fill) {
  const int fd = memfd_create(memfd_name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) fail_creating(what, "memfd_create", -1);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    fail_creating(what, "cannot size it (" + std::to_string(bytes) + " bytes)", fd);
  }
  if (bytes > 0) {
    void* writable = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (writable == MAP_FAILED) fail_creating(what, "cannot map it", fd);
    try {
      fill(static_cast<uint8_t*>(writable));
    } catch (...) {
      munmap(writable, bytes);
      close(fd);
      throw;
    }
    munmap(writable, bytes);  // F_SEAL_WRITE refuses while a writable mapping exists
  }
  if (fcntl(fd, F_ADD_SEALS, kNeededSeals | F_SEAL_SEAL) != 0) {
    fail_creating(what, "cannot seal it", fd);
  }
  SealedMapping mapping{fd, nullptr, bytes};
  if (bytes > 0) {
    const void* data = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) fail_creating(what, "cannot map it read-only", fd);
    mapping.data = static_cast<const uint8_t*>(data);
  }
  return mapping;
}

SealedMapping open_sealed_memfd(const std::string& path, const std::string& what,
                                size_t min_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail_opening(what, path, std::string("cannot open it (") + std::strerror(errno) +
                                 "); the trainer that wrote it must still be running", -1);
  }
  struct stat info {};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (fstat(fd, &info) != 0 || seals < 0 || (seals & kNeededSeals) != kNeededSeals) {
    fail_opening(what, path, "not a memfd sealed against writes", fd);
  }
  const auto bytes = static_cast<size_t>(info.st_size);
  if (bytes < min_bytes || bytes == 0) {
    fail_opening(what, path, "holds " + std::to_string(bytes) + " bytes, less than its header",
                 fd);
  }
  const void* data = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    fail_opening(what, path, std::string("cannot map it: ") + std::strerror(errno), fd);
  }
  return SealedMapping{fd, static_cast<const uint8_t*>(data), bytes};
}

void release(const SealedMapping& mapping) {
  if (mapping.data) munmap(const_cast<uint8_t*>(mapping.data), mapping.bytes);
  if (mapping.fd >= 0) close(mapping.fd);
}

std::string proc_fd_path(int fd) {
  return "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd);
}

std::string digest_text(uint64_t digest) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(digest));
  return text;
}

}  // namespace ringloader::data
