// Reads one sample's image bytes out of its shard, in a worker. Local
// shards: pread at the indexed offset (open files are kept, a bounded
// number). pipe: shards: each shard's command stays open and is read
// forward, skipping members this worker does not need; asking for a member
// behind the stream's position restarts the command (counted).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "loader/data/shard_input.h"
#include "loader/data/tar_index.h"

namespace ringloader::data {

class TarMemberReader {
 public:
  explicit TarMemberReader(const TarIndex& index) : index_(index) {}

  // Thread-safe. Throws IoError naming the shard and member when the bytes
  // are not there any more (shard shrank, command failed).
  void read(int64_t sample, std::vector<uint8_t>& out);

  // Times a pipe: command was started again to go backwards.
  int64_t pipe_restarts() const;

 private:
  std::shared_ptr<FileInput> file(int32_t shard);
  void read_pipe(const TarSample& sample, std::vector<uint8_t>& out);
  [[noreturn]] void fail_short(const TarSample& sample, size_t got) const;

  const TarIndex& index_;
  mutable std::mutex mutex_;
  // Most-recently-used first; bounded so thousands of shards never exhaust
  // file descriptors.
  std::list<std::pair<int32_t, std::shared_ptr<FileInput>>> files_;
  std::unordered_map<int32_t, std::unique_ptr<PipeInput>> pipes_;
  std::vector<int32_t> pipe_order_;  // oldest first, for closing
  int64_t pipe_restarts_ = 0;
};

}  // namespace ringloader::data
