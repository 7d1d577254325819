// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar/tar_walk.h"

#include <algorithm>
#include <utility>

#include "loader/data/tar/tar_format.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr uint64_t kMaxMetadataBytes = 1 << 20;  // long names, pax records

// Reads a member's data (exactly size bytes) and moves past its padding.
// Memory follows the bytes that arrive, not the size the header claims: a
// shard cut short (or lying) costs what it holds.
std::string read_data(ShardInput& input, uint64_t size, const std::string& shard,
                      const std::string& member) {
  constexpr uint64_t kChunk = 1 << 20;
  std::string data;
  uint64_t got = 0;
  while (got < size) {
    const uint64_t want = std::min(kChunk, size - got);
    data.resize(static_cast<size_t>(got + want));
    const size_t read = input.read(reinterpret_cast<uint8_t*>(data.data()) + got, want);
    got += read;
    if (read < want) break;
  }
  data.resize(static_cast<size_t>(got));
  uint64_t padding = tar_padded(size) - size;
  if (got < size || input.skip(padding) < padding) {
    throw IoError("ringloader: shard " + shard + " is truncated in member '" +
                  member + "'");
  }
  return data;
}

void skip_data(ShardInput& input, uint64_t size, const std::string& shard,
               const std::string& member) {
  uint64_t padded = tar_padded(size);
  if (input.skip(padded) < padded) {
    throw IoError("ringloader: shard " + shard + " is truncated in member '" +
                  member + "'");
  }
}

// At most 18 decimal digits, so the value fits int64_t; every character is
// checked before it is used (a shard's bytes choose the text).
int64_t parse_pax_size(const std::string& text, const std::string& shard) {
  bool ok = !text.empty() && text.size() < 19;
  int64_t size = 0;
  for (size_t i = 0; ok && i < text.size(); ++i) {
    ok = text[i] >= '0' && text[i] <= '9';
    if (ok) size = size * 10 + (text[i] - '0');
  }
  if (!ok) throw IoError("ringloader: shard " + shard + ": bad pax size '" + text + "'");
  return size;
}

const char* type_name(char flag) {
  switch (flag) {
    case '1': return "a hard link";
    case '2': return "a symbolic link";
    case '3': return "a character device";
    case '4': return "a block device";
    case '6': return "a fifo";
    case 'S': return "a sparse file";
    default: return "an unknown type";
  }
}

}  // namespace

TarCursor::TarCursor(ShardInput& input, std::string shard)
    : input_(input), shard_(std::move(shard)) {}

bool TarCursor::next(TarMember& member,
                     const std::function<bool(const std::string&)>& want_data) {
  std::string long_name;  // from a GNU 'L' member, for the next header
  std::string pax_path;   // from a pax 'x' member, for the next header
  int64_t pax_size = -1;  // likewise
  uint8_t block[kTarBlock];
  for (;;) {
    if (ended_) return false;
    size_t got = input_.read(block, kTarBlock);
    if (got == 0) {  // end without the two zero blocks: tolerated, like tarfile
      ended_ = true;
      return false;
    }
    if (got < kTarBlock) {
      throw IoError("ringloader: shard " + shard_ + " is truncated after member '" +
                    last_member_ + "'");
    }
    TarHeader header;
    if (parse_tar_header(block, shard_, header) == TarBlockKind::kZero) {
      ended_ = saw_end_ = true;
      return false;
    }
    std::string name = !pax_path.empty() ? pax_path
                       : !long_name.empty() ? long_name : header.name;
    if (pax_size >= 0 && header.type == TarEntryType::kFile) {
      header.size = static_cast<uint64_t>(pax_size);
    }
    switch (header.type) {
      case TarEntryType::kGnuLongName:
      case TarEntryType::kPaxHeader:
      case TarEntryType::kGnuLongLink:
      case TarEntryType::kPaxGlobal: {
        if (header.size > kMaxMetadataBytes) {
          throw IoError("ringloader: shard " + shard_ + ": metadata member after '" +
                        last_member_ + "' is " + std::to_string(header.size) + " bytes");
        }
        std::string data = read_data(input_, header.size, shard_, header.name);
        if (header.type == TarEntryType::kGnuLongName) {
          long_name = data.substr(0, data.find('\0'));
        } else if (header.type == TarEntryType::kPaxHeader) {
          auto records = parse_pax_records(data, shard_);
          if (records.count("path")) pax_path = records["path"];
          // "size" overrides the next header's (files of 8 GiB and more).
          if (records.count("size")) pax_size = parse_pax_size(records["size"], shard_);
        }
        continue;
      }
      case TarEntryType::kDirectory:
        skip_data(input_, header.size, shard_, name);
        last_member_ = name;
        long_name.clear();
        pax_path.clear();
        pax_size = -1;
        continue;
      case TarEntryType::kUnsupported:
        throw IoError("ringloader: shard " + shard_ + ": member '" + name + "' is " +
                      type_name(header.type_flag) + " (type '" +
                      std::string(1, header.type_flag) +
                      "'); tar shards hold regular files only");
      case TarEntryType::kFile:
        member.name = name;
        member.offset = input_.position();
        member.size = header.size;
        member.data.clear();
        if (want_data(name)) {
          check_member_size(header.size, shard_, name);
          member.data = read_data(input_, header.size, shard_, name);
        } else {
          skip_data(input_, header.size, shard_, name);
        }
        last_member_ = std::move(name);
        return true;
    }
  }
}

void walk_tar(ShardInput& input, const std::string& shard,
              const std::function<bool(const std::string&)>& want_data,
              const std::function<void(TarMember&&)>& on_file, bool* saw_end) {
  TarCursor cursor(input, shard);
  TarMember member;
  while (cursor.next(member, want_data)) on_file(std::move(member));
  if (saw_end) *saw_end = cursor.saw_end();
}

}  // namespace ringloader::data
