// SPDX-License-Identifier: BSD-3-Clause
// A memfd-backed shared mapping. memfd, not /dev/shm: no tmpfs size cap in
// containers, no name in any filesystem, and the pages are freed when the
// last fd and mapping are gone, however the processes die.
#pragma once

#include <cstddef>
#include <string>

namespace ringloader::ring {

class SharedRegion {
 public:
  // Creates a region of `bytes`, sealed against resizing so a worker can
  // never shrink it under another process's mapping (SIGBUS).
  static SharedRegion create(const std::string& name, size_t bytes);
  // Maps an inherited memfd; checks it is sealed and its size.
  static SharedRegion attach(int fd);
  // A read-only memfd holding `text` (the worker configuration).
  static int create_text_fd(const std::string& name, const std::string& text);
  static std::string read_text_fd(int fd);

  SharedRegion() = default;
  // Takes `fd` and the mapping `data` of `size` bytes made from it: both
  // are released when the region dies (a mapping made another way than
  // create/attach, as the node's read-only and copy-on-write ones).
  SharedRegion(int fd, void* data, size_t size) : fd_(fd), data_(data), size_(size) {}
  SharedRegion(SharedRegion&& other) noexcept;
  SharedRegion& operator=(SharedRegion&& other) noexcept;
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;
  ~SharedRegion();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }

 private:
  void reset();
  int fd_ = -1;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ringloader::ring
