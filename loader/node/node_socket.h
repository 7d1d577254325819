// SPDX-License-Identifier: BSD-3-Clause
// How a trainer finds its node: a stream socket in the abstract namespace
// ("@ringloader/<name>": no file to clean up, gone with the node process),
// one connection per attached trainer, held open for the trainer's life so
// each side sees the other die (EOF / POLLHUP). The attach request names the
// lane; the reply carries, by SCM_RIGHTS, the node region's memfd
// (read-only), the lane's control memfd (the trainer's to write) and, for
// host lanes, the node ring's (read-only). Each side learns the other's
// pid and uid from SO_PEERCRED (not from what it says) and refuses another
// uid unless told otherwise (NodeOptions::allow_group,
// AttachOptions::node_uid).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "loader/node/node_layout.h"

namespace ringloader::node {

inline constexpr uint32_t kAttachMagic = 0x4e4c5241;  // "ARLN"
inline constexpr uint32_t kAttachVersion = 4;
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
  // CUDA lanes: this lane's cudaIpcMemHandle_t, a capability to its device
  // memory; sent over this trainer's own connection, never put in memory
  // other trainers map. Zero for host lanes and refusals.
  uint8_t memory_handle[kIpcHandleBytes];
  char message[kReplyMessageBytes];
};
static_assert(sizeof(AttachReply) == 320);
static_assert(offsetof(AttachReply, memory_handle) == 16);

// Throws OptionError unless `name` is 1..80 characters of [A-Za-z0-9._-].
void check_node_name(const std::string& name);

// Binds and listens on the node's name (close-on-exec, non-blocking).
// Throws OptionError if another live process holds the name, saying whose
// (names are public: a process of another uid may have bound it first).
int listen_on(const std::string& name);
// Connects to node `name`, retrying until `timeout_s`; throws NodeError.
int connect_to(const std::string& name, double timeout_s);

// Descriptors one message may carry: the region's, the control's, the ring's.
inline constexpr size_t kMaxPassedFds = 3;

// One message of exactly `bytes`, with `fds` attached (SCM_RIGHTS).
// False (errno set) when the peer is gone.
bool send_message(int socket, const void* data, size_t bytes, const std::vector<int>& fds = {});
void close_all(std::vector<int>* fds);

// A message read in parts from a non-blocking socket: a peer may send its
// bytes one at a time, and no reader waits for it.
struct PartialMessage {
  explicit PartialMessage(size_t bytes) : data(bytes) {}
  std::vector<uint8_t> data;
  size_t got = 0;
  std::vector<int> fds;  // attached descriptors so far (close-on-exec)
  bool complete() const { return got == data.size(); }
};
enum class ReadStep { kDone, kMore, kClosed };
// One recvmsg without waiting: appends what has arrived. kClosed (the
// descriptors closed) when the peer closed, failed or sent a truncated
// control message.
ReadStep read_part(int socket, PartialMessage* message);
// Receives one message of `message->data.size()` bytes by `deadline`:
// kMore when it did not come in time.
ReadStep receive_until(int socket, PartialMessage* message,
                       std::chrono::steady_clock::time_point deadline);

struct PeerCredentials {
  int pid = -1;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
};
// The connected peer's credentials (SO_PEERCRED): the process that
// connected, or that listened. pid -1 when unknown.
PeerCredentials peer_credentials(int socket);
// The connected peer's pid (SO_PEERCRED), or -1.
int peer_pid(int socket);
// Whether `group` is the peer's group or one of its supplementary groups
// (SO_PEERGROUPS).
bool peer_in_group(int socket, gid_t group);
// A pidfd of the peer process (SO_PEERPIDFD, else pidfd_open of its pid),
// close-on-exec; -1 when the kernel has neither.
int peer_pidfd(int socket, int pid);
// A group name, or a number (all digits, 0..4294967294: (gid_t)-1 is no
// group); throws OptionError naming `option` and the value.
gid_t resolve_group(const std::string& group, const std::string& option);
// Whether the peer closed its end (poll for hang-up, no blocking).
bool peer_gone(int socket);

}  // namespace ringloader::node
