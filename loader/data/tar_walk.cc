// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar_walk.h"

#include "loader/data/tar_format.h"
#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr uint64_t kMaxMetadataBytes = 1 << 20;  // long names, pax records

// Reads a member's data (exactly size bytes) and moves past its padding.
std::string read_data(ShardInput& input, uint64_t size, const std::string& shard,
                      const std::string& member) {
  std::string data(static_cast<size_t>(size), '\0');
  size_t got = input.read(reinterpret_cast<uint8_t*>(data.data()), data.size());
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

int64_t parse_pax_size(const std::string& text, const std::string& shard) {
  int64_t size = 0;
  bool ok = !text.empty() && text.size() < 19;
  for (char c : text) {
    ok = ok && c >= '0' && c <= '9';
    size = size * 10 + (c - '0');
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

void walk_tar(ShardInput& input, const std::string& shard,
              const std::function<bool(const std::string&)>& want_data,
              const std::function<void(TarMember&&)>& on_file, bool* saw_end) {
  if (saw_end) *saw_end = false;
  std::string long_name;  // from a GNU 'L' member, for the next header
  std::string pax_path;   // from a pax 'x' member, for the next header
  int64_t pax_size = -1;  // likewise
  std::string last_member = "(start of archive)";
  uint8_t block[kTarBlock];
  for (;;) {
    size_t got = input.read(block, kTarBlock);
    if (got == 0) return;  // end without the two zero blocks: tolerated, like tarfile
    if (got < kTarBlock) {
      throw IoError("ringloader: shard " + shard + " is truncated after member '" +
                    last_member + "'");
    }
    TarHeader header;
    if (parse_tar_header(block, shard, header) == TarBlockKind::kZero) {
      if (saw_end) *saw_end = true;
      return;
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
          throw IoError("ringloader: shard " + shard + ": metadata member after '" +
                        last_member + "' is " + std::to_string(header.size) +
                        " bytes");
        }
        std::string data = read_data(input, header.size, shard, header.name);
        if (header.type == TarEntryType::kGnuLongName) {
          long_name = data.substr(0, data.find('\0'));
        } else if (header.type == TarEntryType::kPaxHeader) {
          auto records = parse_pax_records(data, shard);
          if (records.count("path")) pax_path = records["path"];
          // "size" overrides the next header's (files of 8 GiB and more).
          if (records.count("size")) pax_size = parse_pax_size(records["size"], shard);
        }
        continue;
      }
      case TarEntryType::kDirectory:
        skip_data(input, header.size, shard, name);
        break;
      case TarEntryType::kUnsupported:
        throw IoError("ringloader: shard " + shard + ": member '" + name + "' is " +
                      type_name(header.type_flag) + " (type '" +
                      std::string(1, header.type_flag) +
                      "'); tar shards hold regular files only");
      case TarEntryType::kFile: {
        TarMember member;
        member.name = name;
        member.offset = input.position();
        member.size = header.size;
        if (want_data(name)) {
          member.data = read_data(input, header.size, shard, name);
        } else {
          skip_data(input, header.size, shard, name);
        }
        on_file(std::move(member));
        break;
      }
    }
    last_member = name;
    long_name.clear();
    pax_path.clear();
    pax_size = -1;
  }
}

}  // namespace ringloader::data
