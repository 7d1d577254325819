// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar/tar_format.h"

#include <algorithm>
#include <cstring>

#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr size_t kNameOffset = 0, kNameBytes = 100;
constexpr size_t kModeOffset = 100;
constexpr size_t kSizeOffset = 124, kSizeBytes = 12;
constexpr size_t kMtimeOffset = 136;
constexpr size_t kChecksumOffset = 148, kChecksumBytes = 8;
constexpr size_t kTypeOffset = 156;
constexpr size_t kMagicOffset = 257;
constexpr size_t kPrefixOffset = 345, kPrefixBytes = 155;

std::string field_text(const uint8_t* field, size_t bytes) {
  const char* text = reinterpret_cast<const char*>(field);
  return std::string(text, strnlen(text, bytes));
}

// Octal digits padded with spaces or NULs; GNU tar switches to base-256
// (high bit of the first byte set) for sizes of 8 GiB and more.
bool parse_number(const uint8_t* field, size_t bytes, uint64_t& out) {
  out = 0;
  if (field[0] & 0x80) {
    if (field[0] & 0x40) return false;  // negative
    out = field[0] & 0x3f;
    for (size_t i = 1; i < bytes; ++i) {
      if (out >> 56) return false;
      out = out << 8 | field[i];
    }
    return true;
  }
  size_t i = 0;
  while (i < bytes && (field[i] == ' ' || field[i] == '\0')) ++i;
  bool digits = false;
  for (; i < bytes && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (out >> 60) return false;
    out = out * 8 + static_cast<uint64_t>(field[i] - '0');
    digits = true;
  }
  for (; i < bytes; ++i) {
    if (field[i] != ' ' && field[i] != '\0') return false;
  }
  return digits;
}

TarEntryType type_of(char flag) {
  switch (flag) {
    case '0': case '\0': case '7': return TarEntryType::kFile;  // '7': contiguous
    case '5': return TarEntryType::kDirectory;
    case 'L': return TarEntryType::kGnuLongName;
    case 'K': return TarEntryType::kGnuLongLink;
    case 'x': return TarEntryType::kPaxHeader;
    case 'g': return TarEntryType::kPaxGlobal;
    default: return TarEntryType::kUnsupported;
  }
}

void write_octal(uint64_t value, size_t digits, uint8_t* field) {
  // `digits` octal digits then a NUL, like GNU tar.
  for (size_t i = digits; i-- > 0;) {
    field[i] = static_cast<uint8_t>('0' + (value & 7));
    value >>= 3;
  }
  field[digits] = '\0';
}

}  // namespace

void check_member_size(uint64_t size, const std::string& shard, const std::string& member) {
  if (size <= kMaxMemberBytes) return;
  throw IoError("ringloader: shard " + shard + ": member '" + member + "' is " +
                std::to_string(size) + " bytes, more than the " +
                std::to_string(kMaxMemberBytes) + " ringloader reads of one member");
}

TarBlockKind parse_tar_header(const uint8_t* block, const std::string& shard,
                              TarHeader& out) {
  if (std::all_of(block, block + kTarBlock, [](uint8_t b) { return b == 0; })) {
    return TarBlockKind::kZero;
  }
  uint64_t stored = 0;
  if (!parse_number(block + kChecksumOffset, kChecksumBytes, stored)) {
    throw IoError("ringloader: " + shard + ": not a tar archive (no header "
                  "checksum where a member should start)");
  }
  // The sum counts the checksum field as spaces. Old tars summed signed
  // bytes, so either sum is accepted.
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) {
    bool in_field = i >= kChecksumOffset && i < kChecksumOffset + kChecksumBytes;
    uint8_t byte = in_field ? ' ' : block[i];
    unsigned_sum += byte;
    signed_sum += static_cast<int8_t>(byte);
  }
  std::string name = field_text(block + kNameOffset, kNameBytes);
  if (stored != unsigned_sum && static_cast<int64_t>(stored) != signed_sum) {
    throw IoError("ringloader: " + shard + ": corrupt tar header of member '" +
                  name + "' (checksum " + std::to_string(stored) +
                  ", computed " + std::to_string(unsigned_sum) + ")");
  }
  if (!parse_number(block + kSizeOffset, kSizeBytes, out.size)) {
    throw IoError("ringloader: " + shard + ": member '" + name +
                  "' has an unreadable size field");
  }
  // POSIX ustar ("ustar\0") splits long paths into prefix + name; GNU's
  // "ustar  " uses those bytes for other fields.
  if (std::memcmp(block + kMagicOffset, "ustar\0", 6) == 0) {
    std::string prefix = field_text(block + kPrefixOffset, kPrefixBytes);
    if (!prefix.empty()) name = prefix + "/" + name;
  }
  out.name = std::move(name);
  out.type_flag = static_cast<char>(block[kTypeOffset]);
  out.type = type_of(out.type_flag);
  return TarBlockKind::kHeader;
}

std::map<std::string, std::string> parse_pax_records(const std::string& data,
                                                     const std::string& shard) {
  std::map<std::string, std::string> records;
  size_t at = 0;
  while (at < data.size()) {
    if (data[at] == '\0') break;  // padding some writers leave
    size_t space = data.find(' ', at);
    uint64_t length = 0;
    bool ok = space != std::string::npos && space > at;
    for (size_t i = at; ok && i < space; ++i) {
      ok = data[i] >= '0' && data[i] <= '9' && length < (uint64_t{1} << 40);
      length = length * 10 + static_cast<uint64_t>(data[i] - '0');
    }
    ok = ok && length > space - at + 1 && at + length <= data.size() &&
         data[at + length - 1] == '\n';
    size_t equals = ok ? data.find('=', space) : std::string::npos;
    if (!ok || equals == std::string::npos || equals >= at + length) {
      throw IoError("ringloader: " + shard + ": malformed pax header record at "
                    "byte " + std::to_string(at));
    }
    records[data.substr(space + 1, equals - space - 1)] =
        data.substr(equals + 1, at + length - 1 - equals - 1);
    at += length;
  }
  return records;
}

void make_tar_header(const std::string& name, uint64_t size, char type_flag,
                     uint8_t* block) {
  std::memset(block, 0, kTarBlock);
  std::memcpy(block + kNameOffset, name.data(), std::min(name.size(), kNameBytes));
  write_octal(0644, 7, block + kModeOffset);
  write_octal(0, 7, block + 108);   // uid
  write_octal(0, 7, block + 116);   // gid
  write_octal(size, 11, block + kSizeOffset);
  write_octal(0, 11, block + kMtimeOffset);  // fixed: shards are reproducible
  block[kTypeOffset] = static_cast<uint8_t>(type_flag);
  std::memcpy(block + kMagicOffset, "ustar\0" "00", 8);
  std::memset(block + kChecksumOffset, ' ', kChecksumBytes);
  uint64_t sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) sum += block[i];
  write_octal(sum, 6, block + kChecksumOffset);
  block[kChecksumOffset + 7] = ' ';
}

void split_member_name(const std::string& name, std::string& key,
                       std::string& extension) {
  size_t slash = name.rfind('/');
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = name.find('.', base);
  if (dot == std::string::npos) {
    key = name;
    extension.clear();
    return;
  }
  key = name.substr(0, dot);
  extension = name.substr(dot + 1);
}

}  // namespace ringloader::data
