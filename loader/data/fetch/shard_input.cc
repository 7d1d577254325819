// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/fetch/shard_input.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "ringloader/errors.h"

extern char** environ;

namespace ringloader::data {
namespace {

constexpr const char kPipePrefix[] = "pipe:";

std::string errno_text() { return std::strerror(errno); }

}  // namespace

bool is_pipe_url(const std::string& url) {
  return url.compare(0, sizeof(kPipePrefix) - 1, kPipePrefix) == 0;
}

FileInput::FileInput(const std::string& path)
    : FileInput(open(path.c_str(), O_RDONLY | O_CLOEXEC), path) {}

FileInput::FileInput(int fd, std::string name) : path_(std::move(name)), fd_(fd) {
  if (fd_ < 0) throw IoError("ringloader: cannot open shard " + path_ + ": " + errno_text());
  struct stat info {};
  if (fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd_);
    throw IoError("ringloader: shard " + path_ + " is not a regular file");
  }
  size_ = static_cast<uint64_t>(info.st_size);
  // Members are read front to back within a shard region.
  posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

FileInput::~FileInput() {
  if (fd_ >= 0) close(fd_);
}

size_t FileInput::read_at(uint64_t offset, uint8_t* out, size_t n) const {
  size_t done = 0;
  while (done < n) {
    ssize_t got = pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw IoError("ringloader: cannot read shard " + path_ + ": " + errno_text());
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

size_t FileInput::read(uint8_t* out, size_t n) {
  size_t got = read_at(position_, out, n);
  position_ += got;
  return got;
}

uint64_t FileInput::skip(uint64_t n) {
  uint64_t moved = position_ >= size_ ? 0 : std::min(n, size_ - position_);
  position_ += moved;
  return moved;
}

PipeInput::PipeInput(const std::string& url, int stderr_fd) : url_(url) {
  spawn(url.substr(sizeof(kPipePrefix) - 1), stderr_fd);
}

void PipeInput::spawn(const std::string& command, int stderr_fd) {
  const std::string& url = url_;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw IoError("ringloader: " + url + ": cannot create a pipe: " + errno_text());
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  if (stderr_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stderr_fd, STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                            POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attributes, &all);  // SIGPIPE ends the writer
  posix_spawnattr_setsigmask(&attributes, &none);
  std::vector<char*> argv = {const_cast<char*>("/bin/sh"), const_cast<char*>("-c"),
                             const_cast<char*>(command.c_str()), nullptr};
  int error = posix_spawn(&pid_, "/bin/sh", &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(fds[1]);
  if (error != 0) {
    close(fds[0]);
    pid_ = -1;
    throw IoError("ringloader: " + url + ": cannot start /bin/sh: " + std::strerror(error));
  }
  fd_ = fds[0];
  // A 1 MiB pipe (Linux caps unprivileged sizes at pipe-max-size, 1 MiB by
  // default) instead of 64 KiB: far fewer wake-ups per shard. Best effort.
  fcntl(fd_, F_SETPIPE_SZ, 1 << 20);
}

void PipeInput::abandon() {
  if (!maker_.here()) return;
  std::lock_guard<std::mutex> lock(pid_mutex_);
  if (pid_ > 0) kill(-pid_, SIGTERM);
}

PipeInput::~PipeInput() {
  if (fd_ >= 0) close(fd_);
  // A fork child: the mutex may be held by a thread it does not have.
  if (!maker_.here()) return;
  std::lock_guard<std::mutex> lock(pid_mutex_);
  if (pid_ > 0) {
    kill(-pid_, SIGTERM);  // the command may not be writing (and see no SIGPIPE)
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

void PipeInput::finish() {
  int status = 0;
  {
    // Held while reaping: the command has closed its output, so it ends
    // (or is ending) and this wait is short.
    std::lock_guard<std::mutex> lock(pid_mutex_);
    if (pid_ <= 0) return;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  std::string how = WIFEXITED(status)
                        ? "exited with status " + std::to_string(WEXITSTATUS(status))
                        : "was killed by signal " + std::to_string(WTERMSIG(status));
  throw IoError("ringloader: shard " + url_ + ": the command " + how);
}

size_t PipeInput::read(uint8_t* out, size_t n) {
  size_t done = 0;
  while (done < n && fd_ >= 0) {
    ssize_t got = ::read(fd_, out + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw IoError("ringloader: cannot read " + url_ + ": " + errno_text());
    if (got == 0) {
      close(fd_);
      fd_ = -1;
      finish();
      break;
    }
    done += static_cast<size_t>(got);
  }
  position_ += done;
  return done;
}

uint64_t PipeInput::skip(uint64_t n) {
  uint8_t buffer[1 << 16];
  uint64_t moved = 0;
  while (moved < n) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof(buffer), n - moved));
    size_t got = read(buffer, want);
    moved += got;
    if (got < want) break;
  }
  return moved;
}

std::unique_ptr<ShardInput> open_shard(const std::string& url) {
  if (is_pipe_url(url)) return std::make_unique<PipeInput>(url);
  return std::make_unique<FileInput>(url);
}

}  // namespace ringloader::data
