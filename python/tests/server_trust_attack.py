# SPDX-License-Identifier: BSD-3-Clause
"""Attacks on a loader server, for test_loader_server_trust.py (standard
library only: it runs as `nobody` too, with python -S).

    server_trust_attack.py ADDRESS serve-me TOKEN   # ask for a worker
    server_trust_attack.py ADDRESS garbage          # malformed messages
    server_trust_attack.py ADDRESS silent           # connect, send nothing
    server_trust_attack.py ADDRESS impostor         # bind ADDRESS, wait for a stub

Prints SERVED when the server forked a worker for it (it answered with a
wait status, or a worker wrote to the stderr handed over), REFUSED when
every connection was closed unserved; silent prints CONNECTED and holds on;
impostor prints BOUND, then CONNECTED once a peer connected and GOT-FDS N
(the descriptors it handed over before it hung up), or NOTHING when none
connected within 30 s."""
import os
import select
import socket
import sys
import time


def _descriptors(token):
    """What a stub hands over: stdin, stdout, stderr, ring, config."""
    err_r, err_w = os.pipe()
    null = os.open(os.devnull, os.O_RDWR)
    ring = os.memfd_create("ring")
    os.ftruncate(ring, 1 << 20)
    config = os.memfd_create("config")
    os.write(config, token.encode())
    return err_r, [null, err_w, err_w, ring, config]


def _ask(address, message, fds, err_r):
    """True when a worker ran for this connection."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("\0" + address[1:])
        socket.send_fds(sock, [message], fds)
        ready, _, _ = select.select([sock, err_r], [], [], 5.0)
        if err_r in ready and os.read(err_r, 65536):
            return True
        return sock in ready and len(sock.recv(4)) > 0
    except OSError:
        return False  # closed on us: refused
    finally:
        sock.close()


def serve_me(address, token):
    os.setpgid(0, 0)  # a stub leads its own group
    err_r, fds = _descriptors(token)
    group = os.getpgrp()
    served = [_ask(address, message, fds, err_r)
              for message in (f"0 {group}".encode(), f"0 {group} {token}\n".encode())]
    print("SERVED" if any(served) else "REFUSED", flush=True)


def garbage(address):
    os.setpgid(0, 0)
    group = os.getpgrp()
    err_r, fds = _descriptors("0" * 64)
    cases = [(b"x y", 5), (b"0 zz", 5), (b"\xff\xfe 1", 5), (b"1", 5), (b"0 1 2 3 4", 5),
             (b"99999999999999999999 1", 5), (f"-1 {group}".encode(), 5),
             (f"0 {group}".encode(), 2), (f"0 {group}".encode(), 0),
             (f"7 {group}".encode(), 5), (b"0" * 4000, 5), (f"0 {group} zz\n".encode(), 5)]
    served = [_ask(address, message, fds[:count], err_r) if count
              else _ask_plain(address, message) for message, count in cases]
    print("SERVED" if any(served) else "REFUSED", flush=True)


def _ask_plain(address, message):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("\0" + address[1:])
        sock.sendall(message)
        ready, _, _ = select.select([sock], [], [], 5.0)
        return bool(ready) and len(sock.recv(4)) > 0
    except OSError:
        return False
    finally:
        sock.close()


def silent(address):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect("\0" + address[1:])
    print("CONNECTED", flush=True)
    parent, deadline = os.getppid(), time.monotonic() + 300
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.2)  # held until whoever started it is gone


def impostor(address):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + 10
    while True:  # the real server's socket goes when its last holder exits
        try:
            listener.bind("\0" + address[1:])
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    listener.listen(8)
    print("BOUND", flush=True)
    listener.settimeout(30)
    try:
        stub, _ = listener.accept()
    except OSError:
        print("NOTHING", flush=True)
        return
    print("CONNECTED", flush=True)
    stub.settimeout(5)
    try:
        _, fds, _, _ = socket.recv_fds(stub, 256, 16)
    except OSError:  # (a stub that hangs up sends nothing: 0 below)
        fds = []
    print("GOT-FDS", len(fds), flush=True)


if __name__ == "__main__":
    address, mode, *rest = sys.argv[1:]
    {"serve-me": serve_me, "garbage": garbage, "silent": silent,
     "impostor": impostor}[mode](address, *rest)
