// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/node_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ringloader/errors.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

namespace ringloader::node {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw Error("ringloader: node: " + what + ": " + std::strerror(errno));
}

}  // namespace

Mapping create_node_region(const std::string& name, size_t bytes) {
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) fail("memfd_create(" + name + ")");
  fchmod(fd, 0600);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    fail("sizing the node region to " + std::to_string(bytes) + " bytes");
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    close(fd);
    fail("mapping the node region");
  }
  Mapping region(fd, data, bytes);
  if (fcntl(fd, F_ADD_SEALS,
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
    fail("sealing the node region (Linux 5.1 or later)");
  }
  return region;
}

int reopen_read_only(int fd) {
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  int reopened = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reopened < 0) fail("reopening " + path + " read-only");
  return reopened;
}

namespace {

Mapping map_sealed(int fd, const std::string& what, int protection, int flags) {
  const int seals = fcntl(fd, F_GET_SEALS);
  struct stat info {};
  if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &info) != 0 || info.st_size <= 0) {
    close(fd);
    throw NodeError("ringloader: " + what + " is not a sealed shared memory file");
  }
  const auto bytes = static_cast<size_t>(info.st_size);
  void* data = mmap(nullptr, bytes, protection, flags, fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    close(fd);
    throw NodeError("ringloader: mapping " + what + ": " + std::strerror(error));
  }
  return Mapping(fd, data, bytes);
}

}  // namespace

Mapping map_read_only(int fd, const std::string& what) {
  return map_sealed(fd, what, PROT_READ, MAP_SHARED);
}

Mapping map_copy_on_write(int fd, const std::string& what) {
  // Linux lets a read-only descriptor back a private writable mapping: the
  // write permission is on the private copies, never on the file.
  return map_sealed(fd, what, PROT_READ | PROT_WRITE, MAP_PRIVATE);
}

}  // namespace ringloader::node
