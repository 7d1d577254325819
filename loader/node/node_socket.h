// SPDX-License-Identifier: BSD-3-Clause
// How a trainer finds its node: a stream socket in the abstract namespace
// ("@ringloader/<name>": no file to clean up, gone with the node process),
// one connection per attached trainer, held open for the trainer's life so
// each side sees the other die (EOF / POLLHUP). The attach request names the
// lane; the reply carries the node's region memfd (and, for host lanes, its
// ring's) by SCM_RIGHTS, and the node learns the trainer's pid from
// SO_PEERCRED (not from what it says).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringloader::node {

inline constexpr uint32_t kAttachMagic = 0x4e4c5241;  // "ARLN"
inline constexpr uint32_t kAttachVersion = 2;
inline constexpr size_t kReplyMessageBytes = 240;

struct AttachRequest {
  uint32_t magic;
  uint32_t version;
  int32_t lane;
  int32_t reserved;
};
static_assert(sizeof(AttachRequest) == 16);

struct AttachReply {
  uint32_t magic;
  int32_t accepted;  // 1: the memfd follows; 0: `message` says why not
  int32_t lane;
  int32_t node_pid;
  char message[kReplyMessageBytes];
};
static_assert(sizeof(AttachReply) == 256);

// Throws OptionError unless `name` is 1..80 characters of [A-Za-z0-9._-].
void check_node_name(const std::string& name);

// Binds and listens on the node's name (close-on-exec, non-blocking).
// Throws OptionError if another live process holds the name.
int listen_on(const std::string& name);
// Connects to node `name`, retrying until `timeout_s`; throws NodeError.
int connect_to(const std::string& name, double timeout_s);

// Descriptors one message may carry: the node region's and the ring's.
inline constexpr size_t kMaxPassedFds = 2;

// One message of exactly `bytes`, with `fds` attached (SCM_RIGHTS).
// False (errno set) when the peer is gone.
bool send_message(int socket, const void* data, size_t bytes, const std::vector<int>& fds = {});
// Receives one message of exactly `bytes`; `fds` gets the attached
// descriptors (close-on-exec), in order. False when the peer closed or the
// message is short; nothing is left open then.
bool receive_message(int socket, void* data, size_t bytes, std::vector<int>* fds);
void close_all(std::vector<int>* fds);

// The connected peer's pid (SO_PEERCRED), or -1.
int peer_pid(int socket);
// Whether the peer closed its end (poll for hang-up, no blocking).
bool peer_gone(int socket);

}  // namespace ringloader::node
