// SPDX-License-Identifier: BSD-3-Clause
// MNIST-style IDX files (http://yann.lecun.com/exdb/mnist/ format), plain or
// gzip-compressed: the images (magic 0x803, N x H x W bytes) and labels
// (magic 0x801, N bytes) of MNIST, Fashion-MNIST, KMNIST, EMNIST.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringloader::data {

struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> values;
};

// Reads a whole ubyte IDX file. Throws IoError (unreadable) or DecodeError
// (bad magic, wrong element type, truncated) naming the file.
IdxArray read_idx(const std::string& path);

// Only the header's dimensions (cheap: for validation in the trainer).
std::vector<uint32_t> read_idx_dims(const std::string& path);

}  // namespace ringloader::data
