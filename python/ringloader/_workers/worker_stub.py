# SPDX-License-Identifier: BSD-3-Clause
"""The worker stub: the process the trainer's C++ WorkerPool spawns
and waits on for each Python worker (run as ``python -S worker_stub.py
ADDRESS --ring-fd 3 --config-fd 4 --index I --parent-pid P``).

It hands its stdio, ring and config descriptors to the loader server at
ADDRESS (see zygote.py), which forks the real worker with the dataset
already loaded: no interpreter start, torch import or unpickling per worker.
It then ends the way the worker ended (same exit status or signal), so the
pool's waitpid reports the worker's death; killed itself, its connection
closes and the server kills the worker. Standard library only, no site: it
starts in milliseconds.

Both ends check the other (see stub_gate.py). The stub proves itself with
the loader's token, the content of its config memfd (descriptor 4, from the
trainer; never on a command line). It hands nothing over unless the server
runs as its own uid with the pid the server's name carries
(``@ringloader-<pid>-<hex>``): the name is public, and another user could
bind it once the real server is gone.
"""
import os
import signal
import socket
import struct
import sys

_CONFIG_FD = 4
_TOKEN_MAX = 256


def _connect(address):
    """A connection to the loader server named `address`, checked."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.connect("\0" + address[1:] if address.startswith("@") else address)
    pid, uid, _ = struct.unpack("3i", server.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    try:
        named = int(address.split("-")[1])
    except (IndexError, ValueError):
        named = None
    # SO_PEERCRED holds the server's effective uid: compared with ours.
    if uid != os.geteuid() or pid != named:
        server.close()
        raise OSError(f"{address} is held by pid {pid} uid {uid}, not the loader "
                      f"server (pid {named} uid {os.geteuid()})")
    return server


def main(argv):
    address = argv[0]
    values = dict(zip(argv[1::2], argv[2::2]))
    index = values["--index"]
    try:
        token = os.pread(_CONFIG_FD, _TOKEN_MAX, 0).decode("ascii").strip()
        server = _connect(address)
        # The worker joins this process's group (the pool kills the group).
        message = f"{index} {os.getpgrp()} {token}\n".encode()
        socket.send_fds(server, [message], [0, 1, 2, 3, _CONFIG_FD])
    except (OSError, UnicodeDecodeError) as error:
        sys.stderr.write(f"ringloader worker {index}: loader server gone: {error}\n")
        return 3
    for fd in (3, _CONFIG_FD):
        os.close(fd)  # the worker holds them now
    status = b""
    while len(status) < 4:
        chunk = server.recv(4 - len(status))
        if not chunk:
            sys.stderr.write(f"ringloader worker {index}: loader server gone\n")
            return 3
        status += chunk
    (status,) = struct.unpack("<i", status)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL, SIGSTOP: already default
        os.kill(os.getpid(), number)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
