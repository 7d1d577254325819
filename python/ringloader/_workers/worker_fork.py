# SPDX-License-Identifier: BSD-3-Clause
"""A loader server's workers: forked on a stub's handshake, or ahead of it.

A worker is a fork of its server (_workers/zygote.py, LoaderServer): the
dataset is already in memory. Forking a server that holds torch and the
trainer's modules takes 10-40 ms on 2 cores, and it sat on the path to a
loader's first batch after the server's reply, the trainer's native setup
and the stub's start. So the server forks a *spare* as soon as it has
nothing else to do: a worker that waits, on a socketpair only it and its
server hold, for the descriptors of the stub that will own it. The next
stub's handshake hands them over (one sendmsg) instead of forking, and the
fork overlaps the stub's start. A spare that cannot take them (it died) is
replaced by a fork, as before.

A spare holds nothing of the server's but the dataset: it closes the
server's sockets and wake pipe at once, and dies with its server
(PR_SET_PDEATHSIG) or when its socketpair closes.

A spare of an IterableDataset's server does not wait idle: its first task
is always its stream's first batch, so it makes that batch as soon as it
has its payload, and attaches to the ring at the first item after the
stub's descriptors come (_iterable_worker.serve_spare).
"""
import itertools
import os
import pickle
import select
import signal
import socket
import struct
import sys
import traceback

from ringloader._workers import dataset_bytes as _dataset_bytes
from ringloader._workers import stub_gate as _stub_gate
from ringloader._workers.frames import recv_exact
from ringloader._workers.fork_hygiene import apply_header, die_with_parent, set_name
from ringloader._workers.library_warmup import import_image_decoders
from ringloader._workers.torch_seeding import import_seeded_modules, seeding_source_reads

_ASSIGNMENT = struct.Struct("<qq")  # index, process group
_BRIEF = struct.Struct("<QQ")  # header and payload sizes


def close_server_state(server):
    """What a worker must not hold of its server: the trainer's channel,
    the listener, other stubs' connections, the wake pipe (a worker holding
    them would keep them open past the server's own end)."""
    for sock in [server.trainer, server.listener, *server.workers, *server.pending]:
        if sock is not None:
            sock.close()
    for spare in server.spares:
        spare.control.close()
    for channel in getattr(server, "sibling_channels", ()):  # _trainer_fork's
        _stub_gate.close_all(channel)
    server.sibling_channels = []  # closed once, as the wake pipe below
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _stub_gate.close_all(server.wake)
    server.wake = ()  # closed once: the numbers may be reused by descriptors received later


def become_worker(server, index, group, fds):
    """This process (a fork of `server`) becomes stub `index`'s worker.
    Never returns."""
    _exit_with(lambda: _serve(server, index, group, fds))


def _serve(server, index, group, fds):
    server_pid, ring_fd = _attach(server, index, group, fds)
    if server.config.get("iterable") is not None:
        from ringloader._workers import iterable_worker as _worker
    else:
        from ringloader._workers import worker as _worker
    return _worker.serve(index, server_pid, server.config, ring_fd=ring_fd)


def _attach(server, index, group, fds):
    """Makes this process stub `index`'s worker, short of its ring
    endpoint: (its server's pid, the ring descriptor)."""
    server_pid = os.getppid()
    # The stub's process group: when the trainer's pool kills the stub's
    # group (a hang) or sees the stub gone, this worker dies with it,
    # before the pool re-does its batch.
    os.setpgid(0, group)
    die_with_parent()
    set_name(f"rl-worker-{index}")
    close_server_state(server)
    # stdio onto 0-2. The ring keeps the number it arrived with: in a
    # zygote forked from the trainer, 3 and 4 may belong to the trainer's
    # objects (a log file), whose finaliser would close it.
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
        if fd > 2:
            os.close(fd)
    os.close(fds[4])  # the config memfd: the payload came by socket
    from ringloader import _exceptions
    _exceptions.set_worker_channel(server.records, index)
    return server_pid, fds[3]


def _exit_with(body):
    """Ends this forked process with body()'s exit code (3 if it raised):
    a fork of the server must never return into the server's loop."""
    code = 3
    try:
        code = body()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def fork_worker(server, index, group, fds):
    """A worker forked now; its pid (the caller closes `fds`)."""
    # Once in the server, for every worker it forks after: not before its
    # first spare, whose fork (and the stub's accept) it would delay.
    import_seeded_modules()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        become_worker(server, index, group, fds)
    return pid


class SpareWorker:
    """A fork of the server waiting for a stub's descriptors (see above).
    Made and used by the server's one thread only.

    `briefed` False: forked before the server had its payload (a server
    forked when an IterableDataset's loader was built: _trainer_fork's
    before_load), so that no fork comes after iter(); brief() then sends
    it the payload, which it unpickles itself (a copy of its own, as
    torch's worker of a stream has anyway)."""

    def __init__(self, server, briefed=True):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        server_pid = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            ours.close()
            _wait_for_assignment(server, server_pid, theirs, briefed)  # never returns
        theirs.close()
        self.pid, self.control, self.briefed = pid, ours, briefed

    def brief(self, header, payload, renewal_fd):
        """Sends the server's header and payload frames (and the stream's
        renewal memfd); False if the spare cannot take them (gone)."""
        try:
            socket.send_fds(self.control, [_BRIEF.pack(len(header), len(payload))],
                            [] if renewal_fd is None else [renewal_fd])
            self.control.sendall(header + payload)
        except OSError:
            return False
        self.briefed = True
        return True

    def hand_over(self, index, group, fds):
        """Gives stub `index`'s descriptors to the spare, which becomes its
        worker; False if it cannot take them (gone). Either way this spare
        is used up (the caller closes `fds`)."""
        try:
            socket.send_fds(self.control, [_ASSIGNMENT.pack(index, group)], fds)
            return True
        except OSError:
            return False
        finally:
            self.control.close()

    def discard(self):
        """Ends it: a closed socketpair is its signal to exit."""
        self.control.close()


def brief_spares(spares, brief):
    """`spares` with each one forked before the payload came sent `brief`
    (SpareWorker.brief's arguments: an IterableDataset's payload; None for
    a map-style one, whose spare would hold a copy of the dataset of its
    own); those that cannot take it are discarded (the stub's worker is
    forked instead)."""
    kept = []
    for spare in spares:
        if spare.briefed or (brief is not None and spare.brief(*brief)):
            kept.append(spare)
        else:
            spare.discard()
    return kept


def _wait_for_assignment(server, server_pid, channel, briefed):
    _exit_with(lambda: _assigned(server, server_pid, channel, briefed))


class _WarmUp:
    """What a new worker pays on the way to its first batch, paid by a
    spare while it waits, step by step until a message arrives (which
    must not wait for it): numpy.random's import and the sources torch's
    seeding reads (_torch_seeding), and torch's choice of CPU kernels
    (cpuinfo reads /proc/cpuinfo at the first dtype conversion, 5-15 ms;
    torch's own workers inherit it from their iterator's base seed draw in
    the trainer, but a server forked when the loader was built predates
    that draw). Then, only while it still waits, what the worker will
    likely import (library_warmup.import_image_decoders): finish() leaves
    that to the worker, which may never need it."""

    def __init__(self):
        import torch
        self._steps = iter([import_seeded_modules, *seeding_source_reads(),
                            lambda: torch.zeros(1, dtype=torch.uint8).float()])
        self._likely = iter([import_image_decoders])

    def until_readable(self, channel):
        for step in itertools.chain(self._steps, self._likely):
            step()
            if select.select([channel], [], [], 0)[0]:
                return  # the rest, if any, after that message

    def finish(self):
        for step in self._steps:
            step()


def _briefed(server, channel):
    """The config the server unpickled, from the brief (SpareWorker.brief);
    False when none comes (discarded) or it does not unpickle (the server
    reports that to the trainer)."""
    message, fds, flags, _ = socket.recv_fds(channel, _BRIEF.size, 1)
    if len(message) != _BRIEF.size or flags & socket.MSG_CTRUNC:
        _stub_gate.close_all(fds)
        return False
    header_size, payload_size = _BRIEF.unpack(message)
    header = pickle.loads(recv_exact(channel, header_size))
    apply_header(header)
    try:  # its stream unpickles the dataset (dataset_bytes)
        server.config = _dataset_bytes.loads_deferring(recv_exact(channel, payload_size))
    except Exception:  # noqa: BLE001  (see above)
        return False
    server.config["parent_pid"] = header["parent_pid"]
    if fds:
        server.config["renewal_fd"] = fds[0]
    return True


def _assigned(server, server_pid, channel, briefed):
    """Becomes the worker of the descriptors its server hands over; 0
    without them (discarded, or its server gone)."""
    die_with_parent()
    if os.getppid() != server_pid:
        return 0  # the server ended before the death signal was armed
    set_name("rl-spare-worker")
    close_server_state(server)
    warm_up = _WarmUp()
    warm_up.until_readable(channel)  # while it waits for its payload, or stub
    if not briefed and not _briefed(server, channel):
        return 0
    if server.config.get("iterable") is not None:
        from ringloader._workers import iterable_worker as _iterable_worker
        warm_up.finish()
        try:
            return _iterable_worker.serve_spare(server.config, _Assignment(server, channel))
        except _Discarded:
            return 0
    warm_up.until_readable(channel)
    try:
        index, group, fds = _Assignment(server, channel).take(block=True)
    except _Discarded:
        return 0
    become_worker(server, index, group, fds)
    return 0


class _Discarded(BaseException):
    """No stub comes for this spare: its server discarded it (a closed
    socketpair), or a message not from the server came. A BaseException:
    raised from a stream's items, it must not be caught as the dataset's
    error."""


class _Assignment:
    """A spare's end of its socketpair: the descriptors of the stub it
    becomes the worker of (SpareWorker.hand_over)."""

    def __init__(self, server, channel):
        self.server, self.channel = server, channel

    def take(self, block):
        """(index, group, fds) once handed over, None while not yet (when
        not `block`); raises _Discarded when none will come."""
        try:
            if not block and not select.select([self.channel], [], [], 0)[0]:
                return None
            message, fds, flags, _ = socket.recv_fds(self.channel, _ASSIGNMENT.size,
                                                     _stub_gate.STUB_FDS)
        except (OSError, ValueError):  # its server gone, or the channel closed
            raise _Discarded from None
        self.channel.close()
        if len(message) != _ASSIGNMENT.size or len(fds) != _stub_gate.STUB_FDS or \
                flags & socket.MSG_CTRUNC:
            _stub_gate.close_all(fds)  # discarded (EOF), or a message not from our server
            raise _Discarded
        return (*_ASSIGNMENT.unpack(message), fds)

    def attach(self, block):
        """(index, server pid, ring fd) once this process is its stub's
        worker (_attach), None while not yet (when not `block`)."""
        taken = self.take(block)
        if taken is None:
            return None
        index, group, fds = taken
        try:
            server_pid, ring_fd = _attach(self.server, index, group, fds)
        except BaseException:  # noqa: BLE001  (called from the dataset's items, which
            # may catch what it raises: this process can be no one's worker now)
            _stub_gate.close_all(fds)
            _exit_with(lambda: traceback.print_exc() or 3)
        return index, server_pid, ring_fd

