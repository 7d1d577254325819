// SPDX-License-Identifier: BSD-3-Clause
// Walks a tar shard member by member, reading only headers (and the small
// members the caller asks for): local shards seek over member data.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "loader/data/shard_input.h"

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
void walk_tar(ShardInput& input, const std::string& shard,
              const std::function<bool(const std::string&)>& want_data,
              const std::function<void(TarMember&&)>& on_file,
              bool* saw_end = nullptr);

}  // namespace ringloader::data
