// SPDX-License-Identifier: BSD-3-Clause
// The tar format as WebDataset shards use it: 512-byte ustar headers, GNU
// long names (././@LongLink) and pax extended headers. Pure parsing: no I/O,
// so every malformed case is unit-testable from bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace ringloader::data {

constexpr uint64_t kTarBlock = 512;

// Bytes a member's data occupies in the archive (padded to whole blocks).
inline uint64_t tar_padded(uint64_t size) {
  return (size + kTarBlock - 1) / kTarBlock * kTarBlock;
}

// The most bytes of one member read into memory (an image, a label). A
// header may claim up to 8 GiB (pax: any size); a corrupt or hostile one
// must be a named error, not an allocation that takes the process down.
constexpr uint64_t kMaxMemberBytes = uint64_t{1} << 30;

// Throws IoError naming `shard`, `member` and `size` when size is over
// kMaxMemberBytes; the walk and the worker's reader ask before allocating.
void check_member_size(uint64_t size, const std::string& shard, const std::string& member);

enum class TarEntryType {
  kFile,          // '0' or NUL: a regular file
  kDirectory,     // '5': skipped
  kGnuLongName,   // 'L': data is the next member's name
  kGnuLongLink,   // 'K': data is the next member's link target (ignored)
  kPaxHeader,     // 'x': data holds records for the next member
  kPaxGlobal,     // 'g': records for the rest of the archive (ignored)
  kUnsupported,   // links, devices, fifos, sparse files, ...
};

struct TarHeader {
  std::string name;  // prefix + "/" + name for ustar
  uint64_t size = 0;
  TarEntryType type = TarEntryType::kFile;
  char type_flag = '0';
};

enum class TarBlockKind { kHeader, kZero };

// Parses one 512-byte block. Returns kZero for an all-zero block (end of
// archive marker). Throws IoError naming `shard` and the reason for a bad
// checksum or an unreadable size field; the caller adds member context.
TarBlockKind parse_tar_header(const uint8_t* block, const std::string& shard,
                              TarHeader& out);

// Parses pax records ("<len> <key>=<value>\n" ...). Throws IoError naming
// `shard` on a malformed record.
std::map<std::string, std::string> parse_pax_records(const std::string& data,
                                                     const std::string& shard);

// Builds a ustar header block for a regular file (used by the shard writer
// and tests). Names longer than 100 bytes need a GNU long-name member first:
// tar_long_name_header gives that header; its data is the name plus NUL.
void make_tar_header(const std::string& name, uint64_t size, char type_flag,
                     uint8_t* block);

// WebDataset's key / extension split: the key is everything up to the first
// dot of the basename (directories included), the extension the rest.
// "a/b/000123.seg.png" -> key "a/b/000123", extension "seg.png".
void split_member_name(const std::string& name, std::string& key,
                       std::string& extension);

}  // namespace ringloader::data
