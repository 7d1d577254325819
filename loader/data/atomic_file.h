// SPDX-License-Identifier: BSD-3-Clause
// Every file the project writes (shards, shard indexes, classes.txt) goes
// through AtomicFile: a fresh file under a random name in the target's own
// folder, created O_CREAT | O_EXCL | O_NOFOLLOW (mkstemp's guarantees), then
// fsync'd and renamed over the target. A reader never sees half a file, and
// whatever another user planted in a shared folder (a symlink or file at a
// predictable name such as "<index>.partial", or at the target itself) is
// neither followed nor kept: the rename replaces the name, and the file
// that results is this process's.
//
// Thread-safety: one object per thread; distinct objects may run at once.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ringloader::data {

class AtomicFile {
 public:
  // Opens `path`'s folder and creates the temporary file in it, with `mode`
  // less the umask (Default: 0666, what std::ofstream gives; pass 0600 for
  // a private file). Throws IoError naming `path` when the folder cannot be
  // opened or written.
  explicit AtomicFile(std::string path, mode_t mode = 0666);
  // Without commit(): the temporary is removed, `path` is left as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Buffered; throws IoError naming `path`.
  void write(const void* data, uint64_t size);
  void write(const std::string& text) { write(text.data(), text.size()); }
  // Flushes, fsyncs, renames the temporary to `path` and fsyncs the folder
  // (the rename survives a crash). Throws IoError naming `path`.
  void commit();

  const std::string& path() const { return path_; }
  // The temporary's name in the folder (tests look for it).
  const std::string& temporary_name() const { return temporary_; }

 private:
  void flush();
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  std::string base_;       // path_'s last component
  std::string temporary_;  // within the folder
  int folder_ = -1;
  int fd_ = -1;
  std::vector<uint8_t> buffer_;
};

// `text` written whole to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, const std::string& text,
                           mode_t mode = 0666);

}  // namespace ringloader::data
