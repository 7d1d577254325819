// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar/tar_writer.h"

#include "loader/data/tar/tar_format.h"

namespace ringloader::data {

TarWriter::TarWriter(const std::string& path) : file_(path) {}

TarWriter::~TarWriter() = default;

void TarWriter::write(const void* data, uint64_t size) {
  file_.write(data, size);
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
  file_.commit();
}

}  // namespace ringloader::data
