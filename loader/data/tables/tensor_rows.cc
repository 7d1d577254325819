// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tables/tensor_rows.h"


#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>

#include "loader/data/tables/sealed_memfd.h"
#include "ringloader/errors.h"

namespace ringloader {
namespace {

constexpr const char* kTypeNames[] = {"uint8",   "int8",     "int16",   "int32",   "int64",
                                      "float16", "bfloat16", "float32", "float64", "bool"};
constexpr size_t kTypeSizes[] = {1, 1, 2, 4, 8, 2, 2, 4, 8, 1};
constexpr size_t kTypeCount = sizeof(kTypeSizes) / sizeof(kTypeSizes[0]);
static_assert(sizeof(kTypeNames) / sizeof(kTypeNames[0]) == kTypeCount);

}  // namespace

const char* name_of(ElementType type) {
  const auto code = static_cast<size_t>(type);
  return code < kTypeCount ? kTypeNames[code] : "unknown";
}

ElementType element_type_from_name(const std::string& name) {
  std::string valid;
  for (size_t code = 0; code < kTypeCount; ++code) {
    if (name == kTypeNames[code]) return static_cast<ElementType>(code);
    valid += (code ? ", " : "") + std::string(kTypeNames[code]);
  }
  throw OptionError("ringloader: unknown element type '" + name + "' (expected one of " +
                    valid + ")");
}

size_t element_size(ElementType type) {
  const auto code = static_cast<size_t>(type);
  if (code >= kTypeCount) {
    throw OptionError("ringloader: element type code " + std::to_string(code) + " is unknown");
  }
  return kTypeSizes[code];
}

namespace data {
namespace {

// A row is one ring sample, a 1 x row_bytes image: its width is an int.
constexpr uint64_t kMaxRowBytes = INT_MAX;

uint64_t round_up(uint64_t bytes, uint64_t to) { return (bytes + to - 1) / to * to; }

// Offsets of the rows and labels for `count` rows of `row_bytes`, or false
// when they pass `limit`. Factors are bounded before they are multiplied.
struct Extent {
  uint64_t data_offset, labels_offset, total;
};

bool compute_extent(uint64_t count, uint64_t row_bytes, bool labels, uint64_t limit,
                    Extent& out) {
  if (row_bytes == 0 || row_bytes > kMaxRowBytes || count > limit / row_bytes ||
      (labels && count > limit / 8)) {
    return false;
  }
  out.data_offset = round_up(sizeof(TensorRowsHeader), 64);
  const uint64_t data_end = out.data_offset + count * row_bytes;
  if (data_end < out.data_offset || data_end > limit) return false;
  out.labels_offset = labels ? round_up(data_end, 8) : 0;
  out.total = labels ? out.labels_offset + count * 8 : data_end;
  return out.total >= data_end && out.total <= limit;
}

// product(shape) * element size, or 0 when a dimension is negative or the
// row would pass kMaxRowBytes (checked per factor: no overflow).
uint64_t row_bytes_of(const uint64_t* shape, uint32_t dims, size_t element) {
  uint64_t bytes = element;
  for (uint32_t d = 0; d < dims; ++d) {
    if (shape[d] > kMaxRowBytes || (shape[d] && bytes > kMaxRowBytes / shape[d])) return 0;
    bytes *= shape[d];
  }
  return bytes;
}

uint64_t digest_of(const uint8_t* data, uint64_t size) {
  uint64_t hash = 14695981039346656037ull;
  uint64_t at = 0;
  for (; at + 8 <= size; at += 8) {
    uint64_t word;
    std::memcpy(&word, data + at, sizeof word);
    hash = (hash ^ word) * 1099511628211ull;
  }
  for (; at < size; ++at) hash = (hash ^ data[at]) * 1099511628211ull;
  return hash;
}

[[noreturn]] void fail_open(const std::string& path, const std::string& why) {
  throw IoError("ringloader: tensor rows " + path + ": " + why);
}

TensorRowsHeader header_for(const TensorRowsData& rows) {
  if (rows.rows == nullptr || rows.row_count <= 0) {
    throw OptionError("ringloader: tensor rows need at least one row (got " +
                      std::to_string(rows.row_count) + ")");
  }
  if (rows.row_shape.size() > kMaxRowDims) {
    throw OptionError("ringloader: a tensor row has " + std::to_string(rows.row_shape.size()) +
                      " dimensions; at most " + std::to_string(kMaxRowDims));
  }
  TensorRowsHeader header{};
  header.magic = kTensorRowsMagic;
  header.version = kTensorRowsVersion;
  header.header_bytes = sizeof(TensorRowsHeader);
  header.count = static_cast<uint64_t>(rows.row_count);
  header.element_type = static_cast<uint32_t>(rows.type);
  header.row_dims = static_cast<uint32_t>(rows.row_shape.size());
  for (uint32_t d = 0; d < header.row_dims; ++d) {
    if (rows.row_shape[d] < 0) throw OptionError("ringloader: a tensor row has a negative size");
    header.row_shape[d] = static_cast<uint64_t>(rows.row_shape[d]);
  }
  header.row_bytes = row_bytes_of(header.row_shape, header.row_dims, element_size(rows.type));
  Extent extent{};
  if (!compute_extent(header.count, header.row_bytes, rows.labels != nullptr, UINT64_MAX / 2,
                      extent)) {
    throw OptionError("ringloader: tensor rows must be 1 byte to 2 GiB - 1 each (a row of " +
                      std::to_string(header.row_bytes) + " bytes, " +
                      std::to_string(header.count) + " rows)");
  }
  header.data_offset = extent.data_offset;
  header.labels_offset = extent.labels_offset;
  header.total_bytes = extent.total;
  return header;
}

}  // namespace

std::shared_ptr<const TensorRows> TensorRows::build(const TensorRowsData& rows) {
  const TensorRowsHeader header = header_for(rows);
  const SealedMapping mapping = create_sealed_memfd(
      "ringloader-rows", "tensor rows", header.total_bytes, [&](uint8_t* base) {
        std::memcpy(base, &header, sizeof header);
        std::memcpy(base + header.data_offset, rows.rows, header.count * header.row_bytes);
        if (rows.labels) {
          std::memcpy(base + header.labels_offset, rows.labels, header.count * 8);
        }
        const uint64_t digest = digest_of(base + header.data_offset,
                                          header.total_bytes - header.data_offset);
        std::memcpy(base + offsetof(TensorRowsHeader, digest), &digest, sizeof digest);
      });
  return std::shared_ptr<const TensorRows>(new TensorRows(mapping));
}

std::shared_ptr<const TensorRows> TensorRows::open(const std::string& path) {
  std::shared_ptr<const TensorRows> rows(
      new TensorRows(open_sealed_memfd(path, "tensor rows", sizeof(TensorRowsHeader))));
  try {
    rows->validate();
  } catch (const Error& error) {
    fail_open(path, error.what());
  }
  return rows;
}

TensorRows::TensorRows(const SealedMapping& mapping)
    : fd_(mapping.fd), data_(mapping.data), bytes_(mapping.bytes),
      header_(reinterpret_cast<const TensorRowsHeader*>(mapping.data)) {}

TensorRows::~TensorRows() { release(SealedMapping{fd_, data_, bytes_}); }

void TensorRows::validate() const {
  const TensorRowsHeader& h = *header_;
  if (h.magic != kTensorRowsMagic) throw IoError("bad magic (not tensor rows)");
  if (h.version != kTensorRowsVersion) {
    throw IoError("version " + std::to_string(h.version) + ", this build reads " +
                  std::to_string(kTensorRowsVersion));
  }
  if (h.header_bytes != sizeof(TensorRowsHeader)) {
    throw IoError("header of " + std::to_string(h.header_bytes) + " bytes, expected " +
                  std::to_string(sizeof(TensorRowsHeader)));
  }
  if (h.element_type >= kTypeCount) {
    throw IoError("element type code " + std::to_string(h.element_type) + " is unknown");
  }
  if (h.row_dims > kMaxRowDims) {
    throw IoError("rows of " + std::to_string(h.row_dims) + " dimensions; at most " +
                  std::to_string(kMaxRowDims));
  }
  const uint64_t row_bytes = row_bytes_of(h.row_shape, h.row_dims, kTypeSizes[h.element_type]);
  if (row_bytes == 0 || row_bytes != h.row_bytes) {
    throw IoError("row_bytes " + std::to_string(h.row_bytes) +
                  " does not match the row shape and element type");
  }
  if (h.count == 0) throw IoError("holds no rows");
  Extent extent{};
  if (!compute_extent(h.count, h.row_bytes, h.labels_offset != 0, bytes_, extent) ||
      extent.data_offset != h.data_offset || extent.labels_offset != h.labels_offset ||
      extent.total != h.total_bytes || extent.total != bytes_) {
    throw IoError("its header's offsets and sizes (" + std::to_string(h.count) + " rows of " +
                  std::to_string(h.row_bytes) + " bytes, data at " +
                  std::to_string(h.data_offset) + ", labels at " +
                  std::to_string(h.labels_offset) + ") do not match its " +
                  std::to_string(bytes_) + " bytes");
  }
}

std::vector<int64_t> TensorRows::row_shape() const {
  return {header_->row_shape, header_->row_shape + header_->row_dims};
}

int64_t TensorRows::copy_row(int64_t index, void* destination) const {
  if (index < 0 || index >= size()) {
    throw IoError("ringloader: sample " + std::to_string(index) +
                  " is outside the tensor rows of " + std::to_string(size()));
  }
  const auto row = static_cast<uint64_t>(index);
  std::memcpy(destination, data_ + header_->data_offset + row * header_->row_bytes,
              header_->row_bytes);
  if (!has_labels()) return 0;
  int64_t label;
  std::memcpy(&label, data_ + header_->labels_offset + row * 8, sizeof label);
  return label;
}

std::string TensorRows::proc_path() const { return proc_fd_path(fd_); }

std::string TensorRows::digest() const { return digest_text(header_->digest); }

}  // namespace data
}  // namespace ringloader
