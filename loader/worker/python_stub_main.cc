// SPDX-License-Identifier: BSD-3-Clause
// ringloader-python-stub: the process the trainer's WorkerPool spawns and
// waits on for each Python worker (python/ringloader/_workers/zygote.py).
//
//   ringloader-python-stub ADDRESS --ring-fd 3 --config-fd 4 --index I --parent-pid P
//
// It hands its stdio, ring and config descriptors to the loader server at
// ADDRESS, which forks the real worker with the dataset already loaded, and
// then ends the way that worker ended (same exit status or signal), so the
// pool's waitpid reports the worker's death; killed itself, its connection
// closes and the server kills the worker. It is C++ rather than Python for
// its start: about 1 ms against an interpreter's 25-30 ms, on the way to
// every Python worker's first batch.
//
// Both ends check the other (python/ringloader/_workers/stub_gate.py). The
// stub proves itself with the loader's token, the content of its config
// memfd (descriptor 4, from the trainer; never on a command line). It hands
// nothing over unless the server runs as its own effective uid with the pid
// the server's name carries (`@ringloader-<pid>-<hex>`): the name is
// public, and another user could bind it once the real server is gone.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr int kConfigFd = 4;
constexpr size_t kTokenMax = 256;
// stdin, stdout, stderr, ring, config: stub_gate.STUB_FDS.
constexpr int kHandedFds[] = {0, 1, 2, 3, kConfigFd};
constexpr int kLostServer = 3;

int fail(const std::string& index, const std::string& why) {
  std::fprintf(stderr, "ringloader worker %s: loader server gone: %s\n", index.c_str(),
               why.c_str());
  return kLostServer;
}

// The pid in "@ringloader-<pid>-<hex>", or -1.
pid_t named_pid(const std::string& address) {
  const size_t first = address.find('-');
  if (first == std::string::npos) return -1;
  const size_t second = address.find('-', first + 1);
  const std::string digits = address.substr(first + 1, second - first - 1);
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return static_cast<pid_t>(std::strtol(digits.c_str(), nullptr, 10));
}

// A connection to the loader server named `address` ("@name": abstract),
// checked: the server's effective uid is ours and its pid the named one.
// Returns the socket, or -1 with `why` set.
int connect_checked(const std::string& address, std::string& why) {
  sockaddr_un where{};
  where.sun_family = AF_UNIX;
  std::string path = address;
  if (!path.empty() && path[0] == '@') path[0] = '\0';
  if (path.empty() || path.size() >= sizeof(where.sun_path)) {
    why = "bad address " + address;
    return -1;
  }
  std::memcpy(where.sun_path, path.data(), path.size());
  const int server = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server < 0) {
    why = std::strerror(errno);
    return -1;
  }
  const socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  if (connect(server, reinterpret_cast<sockaddr*>(&where), length) != 0) {
    why = address + ": " + std::strerror(errno);
    close(server);
    return -1;
  }
  ucred peer{};
  socklen_t size = sizeof(peer);
  if (getsockopt(server, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 ||
      peer.uid != geteuid() || peer.pid != named_pid(address)) {
    why = address + " is held by pid " + std::to_string(peer.pid) + " uid " +
          std::to_string(peer.uid) + ", not the loader server (pid " +
          std::to_string(named_pid(address)) + " uid " + std::to_string(geteuid()) + ")";
    close(server);
    return -1;
  }
  return server;
}

// The loader's token: the config memfd's content, whitespace trimmed.
bool read_token(std::string& token) {
  char text[kTokenMax] = {};
  const ssize_t got = pread(kConfigFd, text, sizeof(text), 0);
  if (got <= 0) return false;
  token.assign(text, static_cast<size_t>(got));
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
    token.pop_back();
  }
  return !token.empty();
}

bool send_descriptors(int server, const std::string& message) {
  char control[CMSG_SPACE(sizeof(kHandedFds))] = {};
  iovec data{const_cast<char*>(message.data()), message.size()};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  header.msg_control = control;
  header.msg_controllen = sizeof(control);
  cmsghdr* rights = CMSG_FIRSTHDR(&header);
  rights->cmsg_level = SOL_SOCKET;
  rights->cmsg_type = SCM_RIGHTS;
  rights->cmsg_len = CMSG_LEN(sizeof(kHandedFds));
  std::memcpy(CMSG_DATA(rights), kHandedFds, sizeof(kHandedFds));
  ssize_t sent;
  do {
    sent = sendmsg(server, &header, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(message.size());
}

// The worker's wait status, as the server relays it (4 bytes, little
// endian, as Python's struct "<i"); false when the server is gone first.
bool receive_status(int server, int32_t& status) {
  unsigned char bytes[4];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = recv(server, bytes + got, sizeof(bytes) - got, 0);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<size_t>(n);
  }
  status = static_cast<int32_t>(static_cast<uint32_t>(bytes[0]) |
                                static_cast<uint32_t>(bytes[1]) << 8 |
                                static_cast<uint32_t>(bytes[2]) << 16 |
                                static_cast<uint32_t>(bytes[3]) << 24);
  return true;
}

// Ends as the worker ended: by its signal, else with its exit code.
int end_as(int32_t status) {
  if (WIFSIGNALED(status)) {
    const int number = WTERMSIG(status);
    signal(number, SIG_DFL);
    kill(getpid(), number);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : kLostServer;
}

}  // namespace

int main(int argc, char** argv) {
  // No PR_SET_PDEATHSIG: that follows the spawning *thread*, and a Python
  // loader's workers are started from short-lived threads (start_all). A
  // dead trainer closes its end of the server's socket, and the server
  // kills its workers; the pool kills a stub it no longer wants.
  if (argc < 2 || argc % 2 != 0) {
    std::fprintf(stderr,
                 "usage: ringloader-python-stub ADDRESS --ring-fd 3 --config-fd 4 "
                 "--index N --parent-pid N\n(spawned by the ringloader library; not "
                 "meant to be run by hand)\n");
    return 2;
  }
  std::string index = "?";
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--index") == 0) index = argv[i + 1];
  }
  std::string token, why;
  if (!read_token(token)) return fail(index, "no token in descriptor 4");
  const int server = connect_checked(argv[1], why);
  if (server < 0) return fail(index, why);
  // The worker joins this process's group (the pool kills the group).
  const std::string message =
      index + " " + std::to_string(getpgrp()) + " " + token + "\n";
  if (!send_descriptors(server, message)) return fail(index, std::strerror(errno));
  close(3);  // the worker holds the ring and config now
  close(kConfigFd);
  int32_t status = 0;
  if (!receive_status(server, status)) return fail(index, "no status");
  return end_as(status);
}
