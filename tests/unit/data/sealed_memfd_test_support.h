// SPDX-License-Identifier: BSD-3-Clause
// For the tests of tables in a sealed memfd (sample_table, tensor_rows):
// read a table's bytes back, put chosen bytes into a memfd sealed (or not)
// as a trainer would leave it, and say what Table::open makes of them.
#pragma once

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ringloader/errors.h"

namespace ringloader::data::memfd_test {

template <class Table>
std::vector<uint8_t> bytes_of(const Table& table) {
  std::ifstream in(table.proc_path(), std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A memfd holding `bytes`; returns its /proc path and keeps the fd open in `fd`.
inline std::string memfd_with(const std::vector<uint8_t>& bytes, bool seal, int& fd) {
  fd = memfd_create("test-table", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  if (seal) EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK), 0);
  return "/proc/self/fd/" + std::to_string(fd);
}

// What Table::open says of these bytes ("" when it accepts them); an
// error must name the file.
template <class Table>
std::string open_error(const std::vector<uint8_t>& bytes, bool seal = true) {
  int fd = -1;
  const std::string path = memfd_with(bytes, seal, fd);
  std::string what;
  try {
    Table::open(path);
  } catch (const IoError& error) {
    what = error.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
  }
  close(fd);
  return what;
}

}  // namespace ringloader::data::memfd_test
