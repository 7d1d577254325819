// SPDX-License-Identifier: BSD-3-Clause
// A descriptor closed when its scope ends (and with it any flock it holds),
// however the scope ends: the owner of every raw descriptor that an
// exception could otherwise leak.
#pragma once

#include <unistd.h>

#include <utility>

namespace ringloader::data {

struct Fd {
  int fd = -1;
  explicit Fd(int value) : fd(value) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd >= 0) close(fd);
      fd = other.release();
    }
    return *this;
  }
  int get() const { return fd; }
  int release() { return std::exchange(fd, -1); }
};

}  // namespace ringloader::data
