# SPDX-License-Identifier: BSD-3-Clause
"""The loader server's gate (_stub_gate.py) and accept loop (_zygote.py),
checked on their own: the uids compared are of one kind (effective), the
peer's pidfd is the kernel's where it has one, and a flood of connections
costs the server a bounded number of accepts per wake-up."""
import os
import signal
import socket
import struct

import pytest

from conftest import NOBODY
from ringloader._trainer import python_workers as _python_workers
from ringloader._workers import stub_gate as _stub_gate
from ringloader._workers import zygote as _zygote

needs_root = pytest.mark.cross_user  # as nobody: needs root (conftest.py counts it)


def _in_child(run):
    """run() in a forked child; returns the line it wrote."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read)
        try:
            line = run()
        except BaseException as error:  # noqa: BLE001  (reported to the test)
            line = f"{type(error).__name__}: {error}"
        os.write(write, line.encode()[:4000])
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        line = pipe.read()
    os.waitpid(pid, 0)
    return line


@needs_root
def test_the_gate_compares_the_peers_effective_uid_with_its_own_effective_uid():
    """SO_PEERCRED holds a peer's effective uid. A server whose real uid
    differs from its effective one (setuid) must compare like with like:
    a peer of the same effective uid passes the uid check."""
    grandparent = os.getppid()
    name = f"ringloader-{os.getpid()}-{os.urandom(6).hex()}"

    def server():
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind("\0" + name)
        listener.listen(1)
        os.setreuid(NOBODY, 0)  # real nobody, effective root
        os.write(ready_w, b"R")
        conn, _ = listener.accept()
        try:
            _stub_gate.admit(conn, grandparent)  # the test process's parent
            return "ADMITTED"
        except _stub_gate.Refused as error:
            return f"REFUSED {error}"

    ready_r, ready_w = os.pipe()
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            line = server()
        except BaseException as error:  # noqa: BLE001
            line = f"{type(error).__name__}: {error}"
        os.write(write, line.encode())
        os._exit(0)
    os.close(write)
    assert os.read(ready_r, 1) == b"R"
    peer.connect("\0" + name)  # this process: root, effective root
    with os.fdopen(read) as pipe:
        line = pipe.read()
    os.waitpid(pid, 0)
    peer.close()
    assert line == "ADMITTED", line


def _stub(address, real_uid=None, token="ab" * 32):
    """The C++ stub as the pool spawns it (its ring at 3, its config memfd,
    holding the token, at 4), in a child whose real uid is `real_uid` when
    given (the effective one stays); returns its pid."""
    config = os.memfd_create("config")
    os.write(config, token.encode())
    ring = os.memfd_create("ring")
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.setpgid(0, 0)  # its own group, as the pool spawns it
            os.dup2(ring, 3)
            os.dup2(config, 4)
            if real_uid is not None:
                os.setreuid(real_uid, 0)
            os.execv(_python_workers._STUB, [_python_workers._STUB, address, "--ring-fd", "3",
                                             "--config-fd", "4", "--index", "0",
                                             "--parent-pid", str(os.getppid())])
        finally:
            os._exit(127)
    os.close(config)
    os.close(ring)
    return pid


def _listener(pid=None):
    name = f"ringloader-{os.getpid() if pid is None else pid}-{os.urandom(6).hex()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(1)
    listener.settimeout(10)
    return listener, "@" + name


def _serve_one(listener, status):
    """Takes a stub's hand-over and relays `status` as its worker's; returns
    the message and the number of descriptors it sent."""
    conn, _ = listener.accept()
    with conn:
        message, fds, _, _ = socket.recv_fds(conn, 128, _stub_gate.STUB_FDS)
        _stub_gate.close_all(fds)
        conn.sendall(struct.pack("<i", status))
    return message, len(fds)


def test_the_stub_hands_over_its_descriptors_and_ends_as_its_worker_did():
    listener, address = _listener()
    with listener:
        pid = _stub(address)
        message, count = _serve_one(listener, 7 << 8)  # exit status 7
    assert message == f"0 {pid} {'ab' * 32}\n".encode()  # its own group: the pool's
    assert count == _stub_gate.STUB_FDS
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
    listener, address = _listener()
    with listener:
        pid = _stub(address)
        _serve_one(listener, signal.SIGTERM)  # killed by SIGTERM
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == -signal.SIGTERM


def test_the_stub_hands_nothing_to_a_server_not_of_the_pid_its_name_carries():
    listener, address = _listener(pid=os.getpid() + 1)
    with listener:
        pid = _stub(address)
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            assert conn.recv(128) == b""  # closed, nothing sent
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 3


@needs_root
def test_the_stub_compares_the_servers_effective_uid_with_its_own_effective_uid():
    listener, address = _listener()
    with listener:
        pid = _stub(address, real_uid=NOBODY)  # real nobody, effective root
        message, _ = _serve_one(listener, 0)
    assert message.endswith(b"ab" * 32 + b"\n")
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _has_peer_pidfd():
    one, two = socket.socketpair()
    try:
        os.close(one.getsockopt(socket.SOL_SOCKET, 77))  # SO_PEERPIDFD
        return True
    except OSError:
        return False
    finally:
        one.close()
        two.close()


def _pid_of_pidfd(fd):
    with open(f"/proc/self/fdinfo/{fd}") as info:
        for line in info:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    return None


@pytest.mark.skipif(not _has_peer_pidfd(), reason="a kernel before 6.5 (no SO_PEERPIDFD)")
def test_the_gate_takes_the_kernels_pidfd_of_the_peer_not_one_by_pid():
    """The kernel's pidfd names the process that connected, whatever pid
    the gate was told: a pid reused since the connect cannot stand in."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"ringloader-test-{os.urandom(6).hex()}"
    listener.bind("\0" + name)
    listener.listen(1)
    go_r, go_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(go_w)
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer.connect("\0" + name)
        os.read(go_r, 1)  # held until the test has its pidfd (or ends)
        os._exit(0)
    os.close(go_r)
    conn, _ = listener.accept()
    try:
        pidfd = _stub_gate.peer_pidfd(conn, os.getpid())  # a wrong pid, on purpose
        try:
            assert _pid_of_pidfd(pidfd) == child
        finally:
            os.close(pidfd)
    finally:
        os.close(go_w)
        os.waitpid(child, 0)
        conn.close()
        listener.close()


def test_a_flood_of_connections_gets_a_bounded_number_of_accepts_per_wake_up():
    trainer, _ = socket.socketpair()
    server = _zygote.LoaderServer(trainer)
    server.trainer_pid = os.getppid()  # this process is not its child: all refused
    server.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.listener.bind("\0" + f"ringloader-test-{os.urandom(6).hex()}")
    server.listener.listen(128)
    server.listener.setblocking(False)
    flood = []
    for _ in range(40):
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(server.listener.getsockname())
        flood.append(client)
    server._accept()
    left = 0
    while True:
        try:
            server.listener.accept()[0].close()
            left += 1
        except BlockingIOError:
            break
    # (16: the bound at the time of writing, for a run against older code.)
    assert left == 40 - getattr(_zygote, "MAX_ACCEPTS_PER_WAKE", 16), left
    for client in flood:
        client.close()
    server.close()
