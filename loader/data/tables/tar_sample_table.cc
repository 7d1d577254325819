// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tables/tar_sample_table.h"

#include <malloc.h>

#include <cstring>

#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

uint64_t round8(uint64_t bytes) { return (bytes + 7) & ~uint64_t{7}; }

// Byte offsets of the columns. Counts come from a header another process
// wrote: each is checked against the mapped size before it is multiplied,
// so no product can overflow.
struct Columns {
  uint64_t offsets, sizes, labels, name_end, shard, pool, total;
};

bool compute_columns(uint64_t count, uint64_t pool_bytes, uint64_t limit, Columns& out) {
  if (count > limit / 8 || pool_bytes > limit) return false;
  out.offsets = sizeof(TarSampleTableHeader);
  out.sizes = out.offsets + count * 8;
  out.labels = out.sizes + count * 8;
  out.name_end = out.labels + count * 8;
  out.shard = out.name_end + count * 8;
  out.pool = out.shard + round8(count * 4);
  out.total = out.pool + pool_bytes;
  return out.total <= limit;
}

uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

constexpr const char kWhat[] = "tar sample table";

}  // namespace

void TarSampleTableBuilder::add(const TarSample& sample) {
  offsets_.push_back(sample.offset);
  sizes_.push_back(sample.size);
  labels_.push_back(sample.label);
  shards_.push_back(sample.shard);
  names_.append(sample.image_name);
  name_end_.push_back(names_.size());
}

void TarSampleTableBuilder::append(TarSampleTableBuilder&& other) {
  if (offsets_.empty()) {
    *this = std::move(other);
    return;
  }
  offsets_.insert(offsets_.end(), other.offsets_.begin(), other.offsets_.end());
  sizes_.insert(sizes_.end(), other.sizes_.begin(), other.sizes_.end());
  labels_.insert(labels_.end(), other.labels_.begin(), other.labels_.end());
  shards_.insert(shards_.end(), other.shards_.begin(), other.shards_.end());
  const uint64_t shift = names_.size();
  for (uint64_t end : other.name_end_) name_end_.push_back(shift + end);
  names_.append(other.names_);
  other = TarSampleTableBuilder{};
}

std::shared_ptr<const TarSampleTable> TarSampleTable::build(TarSampleTableBuilder&& builder,
                                                            uint64_t shards) {
  const uint64_t count = builder.offsets_.size();
  for (int32_t shard : builder.shards_) {
    if (shard < 0 || static_cast<uint64_t>(shard) >= shards) {
      throw Error("ringloader: tar sample table: shard id " + std::to_string(shard) +
                  " of " + std::to_string(shards) + " shards");
    }
  }
  Columns columns{};
  compute_columns(count, builder.names_.size(), UINT64_MAX / 2, columns);
  const SealedMapping mapping = create_sealed_memfd(
      "ringloader-tar-samples", kWhat, columns.total, [&](uint8_t* base) {
        auto put = [&](uint64_t offset, const void* source, size_t bytes) {
          if (bytes) std::memcpy(base + offset, source, bytes);
        };
        put(columns.offsets, builder.offsets_.data(), count * 8);
        put(columns.sizes, builder.sizes_.data(), count * 8);
        put(columns.labels, builder.labels_.data(), count * 8);
        put(columns.name_end, builder.name_end_.data(), count * 8);
        put(columns.shard, builder.shards_.data(), count * 4);
        put(columns.pool, builder.names_.data(), builder.names_.size());
        TarSampleTableHeader header{kTarSampleTableMagic, kTarSampleTableVersion,
                                    sizeof(TarSampleTableHeader), count, shards,
                                    builder.names_.size(), columns.total, 0, 0};
        header.digest = fnv1a(base + sizeof header, columns.total - sizeof header);
        std::memcpy(base, &header, sizeof header);
      });
  builder = TarSampleTableBuilder{};
  malloc_trim(0);  // the builder's columns were a transient second copy
  std::shared_ptr<TarSampleTable> table(new TarSampleTable(mapping, ""));
  table->path_ = table->proc_path();  // its messages name it as a worker would
  return table;
}

std::shared_ptr<const TarSampleTable> TarSampleTable::open(const std::string& path) {
  std::shared_ptr<const TarSampleTable> table(new TarSampleTable(
      open_sealed_memfd(path, kWhat, sizeof(TarSampleTableHeader)), path));
  try {
    table->validate();
  } catch (const IoError& error) {
    throw IoError("ringloader: " + std::string(kWhat) + " " + path + ": " + error.what());
  }
  return table;
}

TarSampleTable::TarSampleTable(const SealedMapping& mapping, std::string path)
    : fd_(mapping.fd), data_(mapping.data), bytes_(mapping.bytes), path_(std::move(path)) {
  header_ = reinterpret_cast<const TarSampleTableHeader*>(data_);
  Columns columns{};
  // Pointers are only formed once the sizes fit the mapping; until
  // validate() has run (open runs it first) no accessor is called.
  if (compute_columns(header_->count, header_->pool_bytes, bytes_, columns)) {
    offsets_ = reinterpret_cast<const uint64_t*>(data_ + columns.offsets);
    sizes_ = reinterpret_cast<const uint64_t*>(data_ + columns.sizes);
    labels_ = reinterpret_cast<const int64_t*>(data_ + columns.labels);
    name_end_ = reinterpret_cast<const uint64_t*>(data_ + columns.name_end);
    shard_ = reinterpret_cast<const int32_t*>(data_ + columns.shard);
    pool_ = reinterpret_cast<const char*>(data_ + columns.pool);
  }
}

TarSampleTable::~TarSampleTable() { release(SealedMapping{fd_, data_, bytes_}); }

void TarSampleTable::validate() const {
  if (header_->magic != kTarSampleTableMagic) {
    throw IoError("bad magic (not a tar sample table)");
  }
  if (header_->version != kTarSampleTableVersion) {
    throw IoError("version " + std::to_string(header_->version) + ", this build reads " +
                  std::to_string(kTarSampleTableVersion));
  }
  Columns columns{};
  if (header_->header_bytes != sizeof(TarSampleTableHeader) ||
      !compute_columns(header_->count, header_->pool_bytes, bytes_, columns) ||
      columns.total != header_->total_bytes || columns.total != bytes_ ||
      header_->shards > (uint64_t{1} << 31)) {
    throw IoError("its header's sizes do not match its " + std::to_string(bytes_) + " bytes");
  }
}

void TarSampleTable::fail(int64_t index, const std::string& what) const {
  throw IoError("ringloader: " + std::string(kWhat) + " " + path_ + ": sample " +
                std::to_string(index) + ": " + what + " (a corrupt table)");
}

void TarSampleTable::check_index(int64_t index) const {
  if (index < 0 || index >= size()) {
    throw IoError("ringloader: sample " + std::to_string(index) + " is outside the " +
                  kWhat + " " + path_ + " of " + std::to_string(size()));
  }
}

int32_t TarSampleTable::shard(int64_t index) const {
  check_index(index);
  const int32_t shard = shard_[index];
  if (shard < 0 || static_cast<uint64_t>(shard) >= header_->shards) {
    fail(index, "shard " + std::to_string(shard) + " of " + std::to_string(header_->shards));
  }
  return shard;
}

uint64_t TarSampleTable::offset(int64_t index) const {
  check_index(index);
  const uint64_t offset = offsets_[index];
  if (sizes_[index] > UINT64_MAX - offset) {
    fail(index, "offset " + std::to_string(offset) + " + size " +
                    std::to_string(sizes_[index]) + " overflows");
  }
  return offset;
}

int64_t TarSampleTable::label(int64_t index) const {
  check_index(index);
  return labels_[index];
}

TarSample TarSampleTable::sample(int64_t index) const {
  TarSample out;
  out.shard = shard(index);
  out.offset = offset(index);
  out.size = sizes_[index];
  out.label = labels_[index];
  const uint64_t begin = index == 0 ? 0 : name_end_[index - 1];
  const uint64_t end = name_end_[index];
  if (begin > end || end > header_->pool_bytes) {
    fail(index, "name bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                    ") lie outside its pool of " + std::to_string(header_->pool_bytes));
  }
  out.image_name.assign(pool_ + begin, static_cast<size_t>(end - begin));
  return out;
}

std::string TarSampleTable::proc_path() const { return proc_fd_path(fd_); }

std::string TarSampleTable::digest() const { return digest_text(header_->digest); }

}  // namespace ringloader::data
