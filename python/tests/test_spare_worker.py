# SPDX-License-Identifier: BSD-3-Clause
"""A loader server's spare worker (_workers/worker_fork.py): forked ahead of
its stub, it becomes the worker of the stub whose descriptors it is handed,
holds none of its server's sockets, and ends when discarded, when its
server dies, or (handed nothing) at once."""
import os
import select
import signal
import socket
import time
import types

import pytest

from ringloader._workers import stub_gate as _stub_gate
from ringloader._workers import worker_fork as _worker_fork


def _fake_server():
    """What a spare sees of its LoaderServer: sockets it must close."""
    trainer, trainer_peer = socket.socketpair()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stub, stub_peer = socket.socketpair()
    wake = os.pipe2(os.O_CLOEXEC)
    server = types.SimpleNamespace(trainer=trainer, listener=listener, workers={stub: 1},
                                   pending={}, spares=[], wake=wake, records=None,
                                   config={"num_workers": 1})
    return server, [trainer_peer, stub_peer]


def _descriptors():
    return [os.open(os.devnull, os.O_RDONLY) for _ in range(_stub_gate.STUB_FDS)]


def _exit_status(pid, timeout_s=20):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"spare {pid} did not end in {timeout_s} s")


def test_a_spare_becomes_the_worker_of_the_descriptors_it_is_handed(monkeypatch):
    report_r, report_w = os.pipe()

    def become_worker(server, index, group, fds):  # in the spare
        closed = [server.trainer.fileno(), server.listener.fileno(),
                  *(s.fileno() for s in server.workers)]
        os.write(report_w, repr((index, group, len(fds), closed, server.wake,
                                 os.getppid())).encode())
        os._exit(0)

    monkeypatch.setattr(_worker_fork, "become_worker", become_worker)
    server, peers = _fake_server()
    spare = _worker_fork.SpareWorker(server)
    fds = _descriptors()
    try:
        assert spare.hand_over(3, 4242, fds)
    finally:
        _stub_gate.close_all(fds)
    os.close(report_w)
    assert _exit_status(spare.pid) == 0
    index, group, count, closed, wake, parent = eval(os.read(report_r, 4096))
    os.close(report_r)
    assert (index, group, count) == (3, 4242, _stub_gate.STUB_FDS)
    assert closed == [-1, -1, -1] and wake == ()  # none of its server's sockets
    assert parent == os.getpid()
    assert server.trainer.fileno() != -1  # the server's own stay open
    for sock in [server.trainer, server.listener, *server.workers, *peers]:
        sock.close()
    _stub_gate.close_all(server.wake)


def test_a_discarded_spare_ends_without_becoming_a_worker(monkeypatch):
    monkeypatch.setattr(_worker_fork, "become_worker",
                        lambda *args: os._exit(9))  # would say it became one
    server, peers = _fake_server()
    spare = _worker_fork.SpareWorker(server)
    spare.discard()
    assert _exit_status(spare.pid) == 0
    for sock in [server.trainer, server.listener, *server.workers, *peers]:
        sock.close()
    _stub_gate.close_all(server.wake)


def test_a_spare_that_died_takes_nothing_so_the_server_forks_instead():
    server, peers = _fake_server()
    spare = _worker_fork.SpareWorker(server)
    os.kill(spare.pid, signal.SIGKILL)
    os.waitpid(spare.pid, 0)
    fds = _descriptors()
    try:
        assert not spare.hand_over(0, os.getpgrp(), fds)
    finally:
        _stub_gate.close_all(fds)
    for sock in [server.trainer, server.listener, *server.workers, *peers]:
        sock.close()
    _stub_gate.close_all(server.wake)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs pidfds")
def test_a_spare_dies_with_its_server():
    pid_r, pid_w = os.pipe()
    server_pid = os.fork()
    if server_pid == 0:  # the server: makes a spare, then dies
        try:
            server, _ = _fake_server()
            spare = _worker_fork.SpareWorker(server)
            os.write(pid_w, str(spare.pid).encode())
        finally:
            os._exit(0)
    os.close(pid_w)
    spare_pid = int(os.read(pid_r, 64))
    os.close(pid_r)
    os.waitpid(server_pid, 0)
    try:
        pidfd = os.pidfd_open(spare_pid)
    except ProcessLookupError:
        return  # gone already
    try:
        assert select.select([pidfd], [], [], 20)[0], "the spare outlived its server"
    finally:
        os.close(pidfd)
