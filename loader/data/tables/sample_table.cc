// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tables/sample_table.h"

#include <malloc.h>

#include <cerrno>
#include <cstring>

#include "loader/data/tables/sealed_memfd.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

uint64_t round8(uint64_t bytes) { return (bytes + 7) & ~uint64_t{7}; }

// Byte offsets of the columns. Counts come from a header another process
// wrote: each is checked against the mapped size before it is multiplied,
// so no product can overflow.
struct Columns {
  uint64_t labels, sample_folder, name_end, folder_end, class_end, pool, total;
};

bool compute_columns(uint64_t count, uint64_t folders, uint64_t classes,
                     uint64_t pool_bytes, uint64_t limit, Columns& out) {
  if (count > limit / 8 || folders > limit / 8 || classes > limit / 8 ||
      pool_bytes > limit) {
    return false;
  }
  out.labels = sizeof(SampleTableHeader);
  out.sample_folder = out.labels + count * 8;
  out.name_end = out.sample_folder + round8(count * 4);
  out.folder_end = out.name_end + count * 8;
  out.class_end = out.folder_end + folders * 8;
  out.pool = out.class_end + classes * 8;
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

[[noreturn]] void fail_open(const std::string& path, const std::string& why) {
  throw IoError("ringloader: sample table " + path + ": " + why);
}

void append_ends(std::vector<uint64_t>& ends, std::string& pool,
                 const std::vector<std::string>& texts) {
  for (const std::string& text : texts) {
    pool += text;
    ends.push_back(pool.size());
  }
}

}  // namespace

void SampleTableBuilder::add_class(std::string_view name) { classes_.emplace_back(name); }

uint32_t SampleTableBuilder::folder(std::string_view path) {
  auto [it, added] = folder_ids_.try_emplace(std::string(path),
                                             static_cast<uint32_t>(folders_.size()));
  if (added) {
    if (folders_.size() >= UINT32_MAX) throw Error("ringloader: too many folders");
    folders_.emplace_back(path);
  }
  return it->second;
}

void SampleTableBuilder::add(uint32_t folder, std::string_view name, int64_t label) {
  labels_.push_back(label);
  sample_folder_.push_back(folder);
  names_.append(name);
  name_end_.push_back(names_.size());
}

void SampleTableBuilder::add_path(std::string_view path, int64_t label) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) {
    add(folder(""), path, label);  // a relative name with no folder
  } else {
    add(folder(path.substr(0, slash + 1)), path.substr(slash + 1), label);
  }
}

std::shared_ptr<const SampleTable> SampleTable::build(SampleTableBuilder&& builder) {
  // Folders and classes go after the names in the pool; their ends are
  // offsets into the same pool.
  std::string& pool = builder.names_;
  std::vector<uint64_t> folder_end, class_end;
  append_ends(folder_end, pool, builder.folders_);
  append_ends(class_end, pool, builder.classes_);
  const uint64_t count = builder.labels_.size();
  Columns columns{};
  compute_columns(count, folder_end.size(), class_end.size(), pool.size(), UINT64_MAX / 2,
                  columns);

  const SealedMapping mapping = create_sealed_memfd(
      "ringloader-samples", "sample table", columns.total, [&](uint8_t* base) {
        auto put = [&](uint64_t offset, const void* source, size_t bytes) {
          if (bytes) std::memcpy(base + offset, source, bytes);
        };
        put(columns.labels, builder.labels_.data(), count * 8);
        put(columns.sample_folder, builder.sample_folder_.data(), count * 4);
        put(columns.name_end, builder.name_end_.data(), count * 8);
        put(columns.folder_end, folder_end.data(), folder_end.size() * 8);
        put(columns.class_end, class_end.data(), class_end.size() * 8);
        put(columns.pool, pool.data(), pool.size());
        SampleTableHeader header{kSampleTableMagic, kSampleTableVersion,
                                 sizeof(SampleTableHeader), count, folder_end.size(),
                                 class_end.size(), pool.size(), columns.total, 0};
        header.digest = fnv1a(base + sizeof header, columns.total - sizeof header);
        std::memcpy(base, &header, sizeof header);
      });
  builder = SampleTableBuilder{};
  malloc_trim(0);  // the builder's columns were a transient second copy
  return std::shared_ptr<const SampleTable>(new SampleTable(mapping));
}

std::shared_ptr<const SampleTable> SampleTable::open(const std::string& path) {
  std::shared_ptr<const SampleTable> table(
      new SampleTable(open_sealed_memfd(path, "sample table", sizeof(SampleTableHeader))));
  try {
    table->validate();
  } catch (const IoError& error) {
    fail_open(path, error.what());
  }
  return table;
}

SampleTable::SampleTable(const SealedMapping& mapping)
    : fd_(mapping.fd), data_(mapping.data), bytes_(mapping.bytes) {
  header_ = reinterpret_cast<const SampleTableHeader*>(data_);
  Columns columns{};
  // Pointers are only formed once validate() has checked the sizes; until
  // then they stay null and no accessor runs (open validates first).
  if (compute_columns(header_->count, header_->folders, header_->classes,
                      header_->pool_bytes, bytes_, columns)) {
    labels_ = reinterpret_cast<const int64_t*>(data_ + columns.labels);
    sample_folder_ = reinterpret_cast<const uint32_t*>(data_ + columns.sample_folder);
    name_end_ = reinterpret_cast<const uint64_t*>(data_ + columns.name_end);
    folder_end_ = reinterpret_cast<const uint64_t*>(data_ + columns.folder_end);
    class_end_ = reinterpret_cast<const uint64_t*>(data_ + columns.class_end);
    pool_ = reinterpret_cast<const char*>(data_ + columns.pool);
  }
}

SampleTable::~SampleTable() { release(SealedMapping{fd_, data_, bytes_}); }

void SampleTable::validate() const {
  if (header_->magic != kSampleTableMagic) throw IoError("bad magic (not a sample table)");
  if (header_->version != kSampleTableVersion) {
    throw IoError("version " + std::to_string(header_->version) + ", this build reads " +
                  std::to_string(kSampleTableVersion));
  }
  Columns columns{};
  if (header_->header_bytes != sizeof(SampleTableHeader) ||
      !compute_columns(header_->count, header_->folders, header_->classes,
                       header_->pool_bytes, bytes_, columns) ||
      columns.total != header_->total_bytes || columns.total != bytes_) {
    throw IoError("its header's sizes do not match its " + std::to_string(bytes_) + " bytes");
  }
}

std::string_view SampleTable::pool_range(uint64_t begin, uint64_t end, const char* what,
                                         int64_t index) const {
  if (begin > end || end > header_->pool_bytes) {
    throw IoError("ringloader: sample table: sample " + std::to_string(index) + ": " +
                  what + " bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") lie outside its pool of " + std::to_string(header_->pool_bytes) +
                  " (a corrupt table)");
  }
  return {pool_ + begin, static_cast<size_t>(end - begin)};
}

std::string_view SampleTable::name(int64_t index) const {
  const uint64_t begin = index == 0 ? 0 : name_end_[index - 1];
  return pool_range(begin, name_end_[index], "name", index);
}

std::string_view SampleTable::folder_text(uint64_t folder, int64_t index) const {
  if (folder >= header_->folders) {
    throw IoError("ringloader: sample table: sample " + std::to_string(index) +
                  ": folder " + std::to_string(folder) + " of " +
                  std::to_string(header_->folders) + " (a corrupt table)");
  }
  // Folders follow the names in the pool: the first begins at the last name's end.
  const uint64_t begin = folder == 0 ? (header_->count ? name_end_[header_->count - 1] : 0)
                                     : folder_end_[folder - 1];
  return pool_range(begin, folder_end_[folder], "folder", index);
}

std::string SampleTable::path(int64_t index) const {
  if (index < 0 || index >= size()) {
    throw IoError("ringloader: sample " + std::to_string(index) +
                  " is outside the sample table of " + std::to_string(size()));
  }
  std::string out(folder_text(sample_folder_[index], index));
  out += name(index);
  return out;
}

int64_t SampleTable::label(int64_t index) const {
  if (index < 0 || index >= size()) {
    throw IoError("ringloader: sample " + std::to_string(index) +
                  " is outside the sample table of " + std::to_string(size()));
  }
  return labels_[index];
}

std::vector<std::string> SampleTable::classes() const {
  std::vector<std::string> out;
  uint64_t begin = header_->folders ? folder_end_[header_->folders - 1]
                   : header_->count ? name_end_[header_->count - 1] : 0;
  for (uint64_t c = 0; c < header_->classes; ++c) {
    out.emplace_back(pool_range(begin, class_end_[c], "class name", -1));
    begin = class_end_[c];
  }
  return out;
}

std::string SampleTable::proc_path() const { return proc_fd_path(fd_); }

std::string SampleTable::digest() const { return digest_text(header_->digest); }

}  // namespace ringloader::data
