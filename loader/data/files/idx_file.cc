// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/files/idx_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr uint8_t kUnsignedByteType = 0x08;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// gzread reads plain files too, so one path serves .gz and raw IDX.
GzFile open(const std::string& path) {
  // "e": O_CLOEXEC, so no program a worker runs inherits the file.
  gzFile file = gzopen(path.c_str(), "rbe");
  if (!file) {
    throw IoError("ringloader: cannot open IDX file " + path + ": " +
                  std::strerror(errno ? errno : ENOENT));
  }
  return GzFile(file);
}

void read_exact(gzFile file, void* out, size_t bytes, const std::string& path,
                const char* what) {
  auto* cursor = static_cast<uint8_t*>(out);
  while (bytes > 0) {
    unsigned chunk = bytes > (1u << 30) ? (1u << 30) : static_cast<unsigned>(bytes);
    int n = gzread(file, cursor, chunk);
    if (n <= 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      throw DecodeError("ringloader: IDX file " + path + " is truncated or "
                        "corrupt while reading " + what +
                        (code < 0 ? std::string(": ") + message : ""));
    }
    cursor += n;
    bytes -= static_cast<size_t>(n);
  }
}

std::vector<uint32_t> read_header(gzFile file, const std::string& path) {
  uint8_t magic[4];
  read_exact(file, magic, 4, path, "the header");
  if (magic[0] != 0 || magic[1] != 0 || magic[3] == 0 || magic[3] > 4) {
    throw DecodeError("ringloader: " + path + " is not an IDX file (bad magic)");
  }
  if (magic[2] != kUnsignedByteType) {
    throw DecodeError("ringloader: IDX file " + path +
                      " holds a type other than unsigned bytes");
  }
  std::vector<uint32_t> dims(magic[3]);
  for (auto& dim : dims) {
    uint8_t bytes[4];
    read_exact(file, bytes, 4, path, "the dimensions");
    dim = (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) |
          (uint32_t{bytes[2]} << 8) | bytes[3];
  }
  return dims;
}

}  // namespace

std::vector<uint32_t> read_idx_dims(const std::string& path) {
  GzFile file = open(path);
  return read_header(file.get(), path);
}

IdxArray read_idx(const std::string& path) {
  GzFile file = open(path);
  IdxArray array;
  array.dims = read_header(file.get(), path);
  size_t count = 1;
  for (uint32_t dim : array.dims) count *= dim;
  array.values.resize(count);
  read_exact(file.get(), array.values.data(), count, path, "the values");
  return array;
}

}  // namespace ringloader::data
