// SPDX-License-Identifier: BSD-3-Clause
#include "loader/node/node_socket.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "ringloader/errors.h"

namespace ringloader::node {
namespace {

// The abstract name: a leading NUL, then "ringloader/<name>" (no trailing
// NUL; the length says where it ends).
socklen_t abstract_address(const std::string& name, sockaddr_un& address) {
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  const std::string path = "ringloader/" + name;
  std::memcpy(address.sun_path + 1, path.data(), path.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + path.size());
}

int new_socket() {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(std::string("ringloader: socket: ") + std::strerror(errno));
  return fd;
}

// Who holds a taken name: names are public, so it may be any user's
// process. Connects without waiting (a squatter's full backlog must not
// stall us) and asks the kernel (SO_PEERCRED), not the holder.
std::string name_taken(const std::string& name, const sockaddr_un& address,
                       socklen_t length) {
  const std::string option = "pick another with NodeOptions::name (Python: NodeLoader(name=...))";
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  PeerCredentials holder;
  if (fd >= 0 && connect(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0) {
    holder = peer_credentials(fd);
  }
  if (fd >= 0) close(fd);
  if (holder.pid > 0 && holder.uid != geteuid()) {
    return "ringloader: node name \"" + name + "\" is already bound by pid " +
           std::to_string(holder.pid) + " of uid " + std::to_string(holder.uid) +
           ", another user (node names are public: any user can bind one first); " + option;
  }
  return "ringloader: node name \"" + name +
         "\" is taken by another live node loader on this machine (network namespace" +
         (holder.pid > 0 ? ", pid " + std::to_string(holder.pid) : std::string()) + "); " +
         option;
}

}  // namespace

void check_node_name(const std::string& name) {
  bool valid = !name.empty() && name.size() <= 80;
  for (char c : name) {
    valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                      c == '_' || c == '-');
  }
  if (!valid) {
    throw OptionError("ringloader: node name \"" + name +
                      "\" must be 1..80 characters of A-Z a-z 0-9 . _ -");
  }
}

int listen_on(const std::string& name) {
  check_node_name(name);
  sockaddr_un address;
  socklen_t length = abstract_address(name, address);
  int fd = new_socket();
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    int error = errno;
    close(fd);
    if (error == EADDRINUSE) throw OptionError(name_taken(name, address, length));
    throw Error("ringloader: binding node \"" + name + "\": " + std::strerror(error));
  }
  if (listen(fd, 64) != 0 || fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
    int error = errno;
    close(fd);
    throw Error("ringloader: listening as node \"" + name + "\": " + std::strerror(error));
  }
  return fd;
}

int connect_to(const std::string& name, double timeout_s) {
  check_node_name(name);
  sockaddr_un address;
  socklen_t length = abstract_address(name, address);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_s);
  for (;;) {
    int fd = new_socket();
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) == 0) return fd;
    int error = errno;
    close(fd);
    // No node yet (ECONNREFUSED for an unbound abstract name): a trainer
    // started before its node waits for it.
    bool retry = error == ECONNREFUSED || error == ENOENT || error == EAGAIN ||
                 error == EINTR;
    if (!retry || std::chrono::steady_clock::now() >= deadline) {
      throw NodeError("ringloader: no node loader \"" + name + "\" on this machine after " +
                      std::to_string(timeout_s) + " s (" + std::strerror(error) +
                      "); start ringloader.NodeLoader(..., name=\"" + name + "\") first");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool send_message(int socket, const void* data, size_t bytes, const std::vector<int>& fds) {
  if (fds.size() > kMaxPassedFds) {
    errno = EINVAL;
    return false;
  }
  iovec part{const_cast<void*>(data), bytes};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  if (!fds.empty()) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t sent;
  do {
    sent = sendmsg(socket, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(bytes);
}

void close_all(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

namespace {

// The descriptors a successful recvmsg passed. Only then: after a failed call
// (EAGAIN) the control buffer still holds whatever the stack held, which can
// be an earlier call's descriptors (the AttachListener suite saw each fd
// twice under clang's ASan build), and closing those would close fds the
// process uses elsewhere.
void take_passed_fds(msghdr* header, std::vector<int>* fds) {
  for (cmsghdr* each = CMSG_FIRSTHDR(header); each; each = CMSG_NXTHDR(header, each)) {
    if (each->cmsg_level != SOL_SOCKET || each->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (each->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(each) + i * sizeof(int), sizeof(int));
      fds->push_back(fd);
    }
  }
}

}  // namespace

ReadStep read_part(int socket, PartialMessage* message) {
  if (message->complete()) return ReadStep::kDone;
  iovec part{message->data.data() + message->got, message->data.size() - message->got};
  msghdr header{};
  header.msg_iov = &part;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  header.msg_control = control;
  header.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    got = recvmsg(socket, &header, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ReadStep::kMore;
  if (got > 0) take_passed_fds(&header, &message->fds);
  // A truncated control message (MSG_CTRUNC) lost descriptors: refuse it.
  if (got <= 0 || (header.msg_flags & MSG_CTRUNC)) {
    close_all(&message->fds);
    return ReadStep::kClosed;
  }
  message->got += static_cast<size_t>(got);
  return message->complete() ? ReadStep::kDone : ReadStep::kMore;
}

ReadStep receive_until(int socket, PartialMessage* message,
                       std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const ReadStep step = read_part(socket, message);
    if (step != ReadStep::kMore) return step;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return ReadStep::kMore;
    pollfd watch{socket, POLLIN, 0};
    // Capped so that a clock far in the future cannot overflow poll's int.
    if (poll(&watch, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 60'000))) < 0 &&
        errno != EINTR) {
      close_all(&message->fds);
      return ReadStep::kClosed;
    }
  }
}

PeerCredentials peer_credentials(int socket) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  PeerCredentials peer;
  if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return peer;
  peer.pid = credentials.pid;
  peer.uid = credentials.uid;
  peer.gid = credentials.gid;
  return peer;
}

int peer_pid(int socket) { return peer_credentials(socket).pid; }

bool peer_in_group(int socket, gid_t group) {
  if (peer_credentials(socket).gid == group) return true;
  std::vector<gid_t> groups(256);
  socklen_t length = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  if (getsockopt(socket, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &length) != 0) {
    if (errno != ERANGE) return false;
    groups.resize(length / sizeof(gid_t));
    if (getsockopt(socket, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &length) != 0) return false;
  }
  groups.resize(length / sizeof(gid_t));
  for (gid_t each : groups) {
    if (each == group) return true;
  }
  return false;
}

int peer_pidfd(int socket, int pid) {
#ifndef SO_PEERPIDFD
  constexpr int SO_PEERPIDFD = 77;
#endif
  // SO_PEERPIDFD (Linux 6.5) names the very process that connected;
  // pidfd_open of its pid could, in theory, name a recycled pid.
  int fd = -1;
  socklen_t length = sizeof(fd);
  if (getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &fd, &length) == 0 && fd >= 0) {
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
  }
  if (pid <= 0) return -1;
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

gid_t resolve_group(const std::string& group, const std::string& option) {
  // Digits are a number, parsed strictly: strtoul would take "4294967296"
  // for gid 0 (and " 5" or "+5" for 5).
  const bool digits = !group.empty() && std::all_of(group.begin(), group.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  if (digits) {
    constexpr uint64_t kMaxGid = static_cast<gid_t>(-1) - uint64_t{1};
    uint64_t number = 0;
    for (char c : group) {
      number = number * 10 + static_cast<uint64_t>(c - '0');
      if (number > kMaxGid) {
        throw OptionError("ringloader: " + option + " is \"" + group +
                          "\": a group number must be 0.." + std::to_string(kMaxGid));
      }
    }
    return static_cast<gid_t>(number);
  }
  std::vector<char> buffer(16384);
  struct group entry {};
  struct group* found = nullptr;
  if (getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found) {
    throw OptionError("ringloader: " + option + " names group \"" + group +
                      "\", which this machine does not know");
  }
  return found->gr_gid;
}

bool peer_gone(int socket) {
  pollfd watch{socket, POLLRDHUP, 0};
  int ready = poll(&watch, 1, 0);
  return ready > 0 && (watch.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace ringloader::node
