// SPDX-License-Identifier: BSD-3-Clause
#include "loader/ring/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "ringloader/errors.h"

namespace ringloader::ring {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw Error("ringloader: " + what + ": " + std::strerror(errno));
}

int make_memfd(const std::string& name) {
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) fail("memfd_create(" + name + ")");
  return fd;
}

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("writing memfd");
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

SharedRegion SharedRegion::create(const std::string& name, size_t bytes) {
  int fd = make_memfd(name);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    fail("sizing ring memfd to " + std::to_string(bytes) + " bytes");
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    fail("sealing ring memfd");
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    close(fd);
    fail("mapping " + std::to_string(bytes) + " bytes of ring");
  }
  return SharedRegion(fd, data, bytes);
}

SharedRegion SharedRegion::attach(int fd) {
  // The inherited fd came through dup2, which clears close-on-exec: set it
  // again, or every program the worker runs (a pipe: shard command, a
  // dataset's subprocess) would hold the ring and keep it allocated.
  if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) fail("fcntl(FD_CLOEXEC) on ring memfd");
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    throw Error("ringloader: fd " + std::to_string(fd) +
                " is not a sealed ring memfd");
  }
  struct stat info {};
  if (fstat(fd, &info) != 0) fail("fstat on ring memfd");
  size_t bytes = static_cast<size_t>(info.st_size);
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) fail("mapping inherited ring memfd");
  return SharedRegion(fd, data, bytes);
}

int SharedRegion::create_text_fd(const std::string& name,
                                 const std::string& text) {
  int fd = make_memfd(name);
  write_all(fd, text.data(), text.size());
  if (fcntl(fd, F_ADD_SEALS,
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    close(fd);
    fail("sealing config memfd");
  }
  return fd;
}

std::string SharedRegion::read_text_fd(int fd) {
  struct stat info {};
  if (fstat(fd, &info) != 0) fail("fstat on config memfd");
  std::string text(static_cast<size_t>(info.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = pread(fd, text.data() + done, text.size() - done,
                      static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("reading config memfd");
    done += static_cast<size_t>(n);
  }
  return text;
}

SharedRegion::SharedRegion(SharedRegion&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

SharedRegion& SharedRegion::operator=(SharedRegion&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedRegion::~SharedRegion() { reset(); }

void SharedRegion::reset() {
  if (data_) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  fd_ = -1;
  size_ = 0;
}

}  // namespace ringloader::ring
