// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar_writer.h"

#include <cerrno>
#include <cstring>

#include "loader/data/tar_format.h"
#include "ringloader/errors.h"

namespace ringloader::data {

TarWriter::TarWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wbe");
  if (!file_) {
    throw IoError("ringloader: cannot create " + path + ": " + std::strerror(errno));
  }
}

TarWriter::~TarWriter() {
  if (file_) std::fclose(file_);
}

void TarWriter::write(const void* data, uint64_t size) {
  if (size > 0 && std::fwrite(data, 1, size, file_) != size) {
    throw IoError("ringloader: cannot write " + path_ + ": " + std::strerror(errno));
  }
  written_ += size;
}

void TarWriter::add(const std::string& name, const void* data, uint64_t size) {
  static const uint8_t kZeros[kTarBlock] = {};
  uint8_t block[kTarBlock];
  if (name.size() > 100) {
    const uint64_t name_bytes = name.size() + 1;  // with its NUL, like GNU tar
    make_tar_header("././@LongLink", name_bytes, 'L', block);
    write(block, kTarBlock);
    write(name.c_str(), name_bytes);
    write(kZeros, tar_padded(name_bytes) - name_bytes);
  }
  make_tar_header(name, size, '0', block);
  write(block, kTarBlock);
  write(data, size);
  write(kZeros, tar_padded(size) - size);
}

void TarWriter::close() {
  static const uint8_t kZeros[2 * kTarBlock] = {};
  write(kZeros, sizeof(kZeros));
  std::FILE* file = file_;
  file_ = nullptr;
  if (std::fclose(file) != 0) {
    throw IoError("ringloader: cannot write " + path_ + ": " + std::strerror(errno));
  }
}

}  // namespace ringloader::data
