# SPDX-License-Identifier: BSD-3-Clause
"""Who a loader server serves: only stubs its own trainer's pool spawned.

The server's abstract socket name is public (every user reads it in
/proc/net/unix), so anyone can connect. A connection is served only when
all of these hold, each checked before anything the peer sent is used:

* the peer runs as the server's effective uid (SO_PEERCRED holds the
  peer's effective uid as of its connect: the same kind is compared, the
  one that owns the server's files and ring);
* the peer is a child of the trainer (the pool spawns stubs itself), read
  from /proc/<pid>/stat while a pidfd pins the peer, so a reused pid
  cannot pass: the kernel's own pidfd of the peer (SO_PEERPIDFD, Linux
  6.5 on), else one opened by its pid just after accept;
* its message is exactly ``"<index> <group> <token>\\n"`` with ``index``
  below the loader's worker count, ``group`` the peer's own pid (a stub
  leads its own process group, which the worker joins) and ``token`` the
  loader's secret, with exactly STUB_FDS descriptors and none cut off.

The token is made by the trainer per loader and reaches the stubs only as
the content of the config memfd the pool hands them (their descriptor 4):
never in argv or the environment, so only the trainer's uid (through
/proc/<pid>/fd) or root can read it.

Anything else costs the peer its connection: the server closes it, and
every descriptor it sent, and goes on.
"""
import errno
import hmac
import os
import re
import select
import socket
import struct

STUB_FDS = 5  # stdin, stdout, stderr, ring (3), config (4)
TOKEN_HEX = 64  # 32 random bytes
MESSAGE_MAX = 128  # a valid message is under 90 bytes
# A stub sends its message right after connect; an admitted peer silent
# this long is dropped. The server never blocks on it meanwhile, so this
# bounds only what a silent peer holds, and is generous for a stub that an
# overloaded machine does not schedule for a while.
HANDSHAKE_TIMEOUT_S = 10.0

# SO_PEERPIDFD (asm-generic/socket.h); Python's socket module may lack the name.
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)

_MESSAGE = re.compile(rb"(\d{1,6}) (\d{1,10}) ([0-9a-f]{%d})\n" % TOKEN_HEX)


class Refused(Exception):
    """A peer the server does not serve; the text says why (for debugging,
    never sent to the peer)."""


def new_token():
    return os.urandom(TOKEN_HEX // 2).hex()


def peer_credentials(sock):
    """(pid, uid, gid) of the process that connected `sock`."""
    data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", data)


def peer_pidfd(sock, pid):
    """A pidfd of the peer of `sock`: the kernel's (SO_PEERPIDFD), which
    names the process that connected even if `pid` was reused since; else
    one opened by `pid` (a kernel before 6.5); None before 5.3 (no pidfds).
    Raises Refused when the peer is gone."""
    try:
        return sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError as error:
        if error.errno not in (errno.ENOPROTOOPT, errno.EINVAL):
            raise Refused(f"peer {pid}: no pidfd: {error}") from error
    try:
        return os.pidfd_open(pid)
    except OSError as error:
        if error.errno != errno.ENOSYS:
            raise Refused(f"peer {pid} is gone: {error}") from error
    return None  # the uid and token checks remain


def parent_of(pid):
    """The parent pid of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # The name (field 2) may hold spaces and parentheses: split
            # after its last ')'.
            return int(stat.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def admit(sock, trainer_pid):
    """At accept, before reading a byte: same uid, and a child of the
    trainer. Returns the peer's pid."""
    pid, uid, _ = peer_credentials(sock)
    if uid != os.geteuid():  # both effective (see the module's note)
        raise Refused(f"peer uid {uid} is not the trainer's {os.geteuid()}")
    if pid <= 0:
        raise Refused("peer pid unknown")
    pidfd = peer_pidfd(sock, pid)
    try:
        parent = parent_of(pid)
        # Still alive after the read: the stat read was this process's, not
        # a later holder of a reused pid.
        alive = pidfd is None or not select.select([pidfd], [], [], 0)[0]
    finally:
        if pidfd is not None:
            os.close(pidfd)
    if not alive or parent != trainer_pid:
        raise Refused(f"peer {pid} is not a process the trainer {trainer_pid} started "
                      f"(its parent: {parent})")
    return pid


def parse(message, fds, flags, peer_pid, token, num_workers):
    """A stub's message, checked whole. Returns (index, group)."""
    if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
        raise Refused("message or descriptors cut off")
    if len(fds) != STUB_FDS:
        raise Refused(f"{len(fds)} descriptors, not {STUB_FDS}")
    match = _MESSAGE.fullmatch(message)
    if match is None:
        raise Refused(f"malformed message {message[:40]!r}")
    index, group = int(match.group(1)), int(match.group(2))
    if not hmac.compare_digest(match.group(3), token.encode()):
        raise Refused("wrong token")
    if not 0 <= index < num_workers:
        raise Refused(f"worker index {index} outside [0, {num_workers})")
    if group != peer_pid:
        raise Refused(f"group {group} is not the peer's own ({peer_pid})")
    return index, group


def close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
