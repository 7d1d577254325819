// SPDX-License-Identifier: BSD-3-Clause
// Reading a tar shard's bytes: a local file (read anywhere with pread) or a
// "pipe:<command>" URL (the command's stdout, read forward only), so shards
// can stream from object storage through the user's own tool
// ("pipe:aws s3 cp s3://bucket/train-0001.tar -").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "loader/ring/process_owned.h"

namespace ringloader::data {

bool is_pipe_url(const std::string& url);

// A forward reader over one shard. Short reads happen only at the end.
class ShardInput {
 public:
  virtual ~ShardInput() = default;
  // Reads up to n bytes; fewer only at the end of the shard.
  virtual size_t read(uint8_t* out, size_t n) = 0;
  // Moves forward n bytes (or to the end); returns how far it moved.
  virtual uint64_t skip(uint64_t n) = 0;
  uint64_t position() const { return position_; }

 protected:
  uint64_t position_ = 0;
};

// A local shard: skipping seeks (headers are all the index reads), and
// read_at serves members to several threads at once.
class FileInput final : public ShardInput {
 public:
  explicit FileInput(const std::string& path);  // throws IoError
  // Adopts `fd` (a regular file opened for reading); `name` is what error
  // messages call it (a cached shard is named by its URL).
  FileInput(int fd, std::string name);  // throws IoError
  ~FileInput() override;
  FileInput(const FileInput&) = delete;
  FileInput& operator=(const FileInput&) = delete;

  size_t read(uint8_t* out, size_t n) override;
  uint64_t skip(uint64_t n) override;
  // Thread-safe positional read; returns the bytes read (short at the end).
  size_t read_at(uint64_t offset, uint8_t* out, size_t n) const;
  uint64_t size() const { return size_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// "pipe:<command>": /bin/sh -c <command> in its own process group, its
// stdout read through a pipe. Closing early ends the command (SIGTERM to
// the group); a command that exits non-zero is an IoError at the end.
class PipeInput final : public ShardInput {
 public:
  // `stderr_fd` >= 0: the command's stderr goes there (the shard cache
  // keeps it to report a failed fetch); else it is the caller's stderr.
  explicit PipeInput(const std::string& url, int stderr_fd = -1);  // throws IoError
  ~PipeInput() override;
  PipeInput(const PipeInput&) = delete;
  PipeInput& operator=(const PipeInput&) = delete;

  size_t read(uint8_t* out, size_t n) override;
  uint64_t skip(uint64_t n) override;
  // Any thread, while the input lives: ends the command (SIGTERM to its
  // group), so a read blocked on it returns at once (short: the walk then
  // fails as a cut shard). For the owner of a reader that must stop.
  void abandon();

 private:
  void finish();  // reaps the command; throws IoError on a failed exit
  void spawn(const std::string& command, int stderr_fd);
  std::string url_;
  int fd_ = -1;
  // Guarded by pid_mutex_ once the reader runs: abandon() must never
  // signal a group whose leader was reaped (its id may be reused).
  std::mutex pid_mutex_;
  pid_t pid_ = -1;
  // Only the process that started the command signals and reaps it (a
  // fork child's copy of this input is not its reader).
  ring::MakingProcess maker_;
};

std::unique_ptr<ShardInput> open_shard(const std::string& url);

}  // namespace ringloader::data
