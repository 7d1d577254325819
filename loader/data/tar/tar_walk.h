// SPDX-License-Identifier: BSD-3-Clause
// Walks a tar shard member by member, reading only headers (and the small
// members the caller asks for): local shards seek over member data.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "loader/data/fetch/shard_input.h"

namespace ringloader::data {

struct TarMember {
  std::string name;     // after GNU long names and pax "path"
  uint64_t offset = 0;  // of the data, from the start of the shard
  uint64_t size = 0;
  std::string data;     // filled only when the caller wanted it
};

// Calls on_file for each regular file in archive order. `want_data(name)`
// says which members' bytes to read (e.g. ".cls" labels). Directories and
// pax global headers are skipped. Throws IoError naming `shard` and the
// member for: a corrupt header, a link/device/other member type, a member
// or shard cut short (truncated), a failed pipe: command.
// `saw_end` (optional) tells whether the archive ended with its zero block
// rather than just stopping between two members (which is tolerated).
// The same walk, pulled one member at a time: a worker that streams a
// shard to its k-th sample stops there and goes on from there later.
// Not thread-safe; `input` must outlive it.
class TarCursor {
 public:
  TarCursor(ShardInput& input, std::string shard);
  // The next regular file, its data read when want_data(name) says so
  // (else skipped). False at the end of the archive. Throws as walk_tar.
  bool next(TarMember& member, const std::function<bool(const std::string&)>& want_data);
  bool saw_end() const { return saw_end_; }

 private:
  ShardInput& input_;
  std::string shard_;
  std::string last_member_ = "(start of archive)";
  bool ended_ = false;
  bool saw_end_ = false;
};

void walk_tar(ShardInput& input, const std::string& shard,
              const std::function<bool(const std::string&)>& want_data,
              const std::function<void(TarMember&&)>& on_file,
              bool* saw_end = nullptr);

}  // namespace ringloader::data
