# SPDX-License-Identifier: BSD-3-Clause
"""A loader's own zygote, and its workers started side by side.

The trainer's zygote (_zygote_process._Zygote) is forked at ``import
ringloader``: it lacks every module the trainer imported after that
(``datasets``, ``webdataset``, pyarrow...), so each loader server imports
them again while it unpickles the dataset: a second or more per server,
paid at every ``iter()`` of an IterableDataset loader, whose workers torch
re-creates each epoch. torch's workers are forks of the trainer, which has
those modules already.

So a loader with Python workers (an IterableDataset's, or a map-style
dataset's loader server) forks a zygote of its own from the trainer, if
that is safe then (no thread but idle ones known to be harmless, CUDA
untouched, a small heap: _zygote_process._fork_is_safe, the rule the
trainer's zygote follows), and again later if it was not.
It holds every module the trainer had imported, and forks that loader's
servers for as long as the loader lives. Where the trainer cannot be
forked at ``iter()`` (threads of its own, CUDA), an IterableDataset
loader has the trainer's zygote fork its one instead, which unpickles the dataset once to
import what it needs (_workers/zygote.py, _fork_loader_zygote). Each epoch's servers
still unpickle the dataset as it is at that ``iter()``: a fresh copy for
every worker, as torch's re-created workers get.

An IterableDataset loader built where the trainer can be forked needs
no zygote of its own for its first ``iter()``: it forks that epoch's
servers when it is built (EarlyServer, fork_servers).

The workers of one ``iter()`` start side by side, in the background
(Starts): each waits on its own server, so N workers take the time of
one, and the iterator waits for each at its first batch only.
"""
import atexit
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import weakref

from ringloader import _exceptions
from ringloader._trainer import python_workers as _python_workers
from ringloader._trainer import zygote_process as _zygote_process
from ringloader._workers import stub_gate as _stub_gate
from ringloader._workers import trainer_fork as _trainer_fork
from ringloader._workers import frames as _frames
from ringloader._workers import library_warmup as _library_warmup


class LoaderZygote:
    """The zygote of one loader: forked on demand, killed with the loader."""

    def __init__(self):
        self._zygote = None
        self._finalizer = None

    def get(self, payload=None):
        """The live zygote, or a new one: a fork of the trainer if that is
        safe now, else (given a `payload` to warm it with) one the trainer's
        zygote forks; else None (the trainer's zygote serves)."""
        zygote = self._zygote
        if zygote is not None and zygote.alive():
            return zygote
        self.close()
        try:
            zygote = _zygote_process._Zygote(fork_only=True)
        except (_zygote_process.NotNow, OSError):
            if payload is None:
                return None
            try:
                zygote = _ChildZygote(payload)
            except (OSError, EOFError, _zygote_process.WorkerError):
                return None
        self._zygote = zygote
        self._finalizer = weakref.finalize(self, _end, zygote)
        return zygote

    @property
    def pid(self):
        """Its pid while it lives, else None."""
        zygote = self._zygote
        return zygote.pid if zygote is not None and zygote.alive() else None

    def close(self):
        if self._finalizer is not None:
            self._finalizer()
        self._zygote = self._finalizer = None


class _ChildZygote(_zygote_process._Zygote):
    """A loader's zygote forked by the trainer's (_workers/zygote.py, _fork_loader_zygote),
    held by a pidfd (it is not the trainer's child), warmed with `payload`:
    it unpickles it once before it serves."""

    def __init__(self, payload):  # noqa: D107 (no super().__init__: it forks nothing)
        self.owner, self.ready, self.process = os.getpid(), False, None
        self.lock, self._pidfd = threading.Lock(), None
        parent = _zygote_process.zygote_for_use()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.control, self.pid = ours, None
        try:
            with _zygote_process.lock:
                parent.wait_ready(_zygote_process._timeout_s())
                socket.send_fds(parent.control, [b"Z"], [theirs.fileno()])
            theirs.close()
            ours.settimeout(_zygote_process._timeout_s())
            (self.pid,) = struct.unpack("<q", _frames.recv_exact(ours, 8))
            self._hold(parent.pid or parent.process.pid)
            header = {"sys_path": list(sys.path), "cwd": os.getcwd(),
                      "environ": dict(os.environ)}
            _frames.send_frame(ours, pickle.dumps(header))
            _frames.send_frame(ours, payload)
            ours.settimeout(None)
        except BaseException:
            theirs.close()
            self.kill()
            raise

    def _hold(self, parent_pid):
        """A pidfd on it, taken while it is known to be the zygote's child."""
        pidfd = os.pidfd_open(self.pid)
        if _stub_gate.parent_of(self.pid) != parent_pid:
            os.close(pidfd)
            raise EOFError(f"the loader's zygote (pid {self.pid}) is gone")
        self._pidfd = pidfd

    def alive(self):
        if self.owner != os.getpid() or self._pidfd is None:
            return False
        return not select.select([self._pidfd], [], [], 0)[0]  # readable: ended

    def kill(self):
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                select.select([self._pidfd], [], [], 1.0)  # readable: it ended
            except ProcessLookupError:
                pass
            os.close(self._pidfd)
            self._pidfd = None
        self.control.close()
        self.owner = -1


def _end(zygote):
    """Kills and reaps it (the servers it forked live on: each ends with its
    own loader's socket)."""
    if isinstance(zygote, _ChildZygote) or zygote.alive():  # a reaped pid: not again
        zygote.kill()
    atexit.unregister(zygote.control.close)
    zygote.control.close()


class EarlyServer:
    """A loader server forked when an IterableDataset loader is built, for
    a worker of its first iter() (whose workers start at iter(), where
    torch forks its own). It waits for the dataset as it is at iter() (a
    fresh copy, as torch's workers get); meanwhile the fork costs nothing
    on the way to the first batch.

    The first is forked from the trainer itself, and forks the others
    (fork_servers): the trainer pays one fork of itself (about 20 ms on 2
    cores for a trainer holding torch), not one per worker. Not from a
    zygote of the loader's: that zygote would first have to start (its own
    fork, its descriptors shed) before it forked the servers one by one:
    40-50 ms on the way to a first batch when iter() follows the loader at
    once (2 cores, bench/clients_streams.py). The first is the trainer's
    child (adopted by _zygote_process.reap_servers once it serves), the
    others are its children: it reaps them, and waits for them before it
    ends."""

    def __init__(self, sock, records, pid=None, parent=None, reap_fd=None):
        """`pid`, `reap_fd`: the first's (a child of the trainer); `parent`:
        the first's pid, for the others (their pid comes with their start)."""
        self.socket, self.records, self.pid = sock, records, pid
        self._parent, self._reap_fd = parent, reap_fd
        self.process = None if pid is None else \
            _zygote_process._ServerProcess(pid, os.getpid())

    def started_pid(self, timeout_s):
        """Its pid, once it has started (None past `timeout_s`); take()
        still reads its start message."""
        if self.pid is None and select.select([self.socket], [], [], timeout_s)[0]:
            start = self.socket.recv(9, socket.MSG_PEEK | socket.MSG_WAITALL)
            if len(start) == 9 and start[:1] == b"H":
                return struct.unpack("<q", start[1:])[0]
        return self.pid

    def take(self):
        """(records, (socket, server process)), as PythonWorkers.fork_server
        leaves them. Raises OSError, EOFError or WorkerError when the server
        is gone (the caller forks another)."""
        try:
            bound_s = _zygote_process._timeout_s()
            if not select.select([self.socket], [], [], bound_s)[0]:
                raise _zygote_process.WorkerError(
                    f"ringloader: a loader server forked when the loader was built did "
                    f"not start within {bound_s:g} s")
            if self.socket.recv(1) != b"H":
                raise EOFError("the loader server ended at its start")
            (pid,) = struct.unpack("<q", _frames.recv_exact(self.socket, 8))
            if self.process is None:
                # Pinned by a pidfd while it is known to be the first's child.
                self.pid, self.process = pid, _zygote_process._ServerProcess(pid, self._parent)
            if pid != self.pid or not self.process.alive():
                raise EOFError(f"the loader server {pid} ended before iter()")
        except BaseException:
            self.close()
            raise
        if self._reap_fd is not None:
            _zygote_process.adopt_server(self._reap_fd)
            self._reap_fd = None
        return self.records, (self.socket, self.process)

    def close(self):
        """Ends it, unused: a server whose socket closes ends (the first
        once the others it forked have; it is reaped here)."""
        self.socket.close()
        self.records.close()
        if self._reap_fd is not None:
            if not select.select([self._reap_fd], [], [], _CLOSE_WAIT_S)[0]:
                self.process.kill()
            try:
                os.waitid(os.P_PIDFD, self._reap_fd, os.WEXITED)
            except ChildProcessError:
                pass  # reaped by someone's os.wait()
            os.close(self._reap_fd)
            self._reap_fd = None
        if self.process is not None:
            self.process.close()


# How long closing an unused first server waits for it (and the others it
# forked) to end before killing it.
_CLOSE_WAIT_S = 5.0


def fork_servers(count):
    """`count` EarlyServers, where forking the trainer is safe now
    (_zygote_process._fork_is_safe) and the workers' stub is there
    (_start_server refuses that at iter(), before any fork); else none."""
    if count <= 0 or not _python_workers.stub_present() or \
            not _zygote_process._fork_is_safe():
        return []
    _zygote_process.reap_servers()
    # The payload is cloudpickled (iter() pickles it, the servers and their
    # spares unpickle it): imported once here, before the fork, not 5-8 ms
    # in each of them on the way to the first batch.
    import cloudpickle  # noqa: F401
    # numpy.random (each worker's seeding imports it) and Pillow's plugins,
    # where the trainer has them: inherited, not paid in each spare.
    _library_warmup.warm_inherited_libraries()
    records = [_exceptions.WorkerRecords() for _ in range(count)]
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(count)]
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # never returns
            for ours, _ in pairs:
                ours.close()
            _trainer_fork.serve([(theirs.detach(), record.worker_end())
                                 for (_, theirs), record in zip(pairs, records)])
    except BaseException as error:
        for (ours, _), record in zip(pairs, records):
            ours.close()
            record.close()
        if isinstance(error, OSError):
            return []  # no fork now (EAGAIN): forked at iter() instead
        raise
    finally:
        for _, theirs in pairs:
            theirs.close()
    # Taken while the pid is surely our unreaped child: it names this
    # process for the reap, whoever reuses the number later.
    first = EarlyServer(pairs[0][0], records[0], pid=pid, reap_fd=os.pidfd_open(pid))
    return [first] + [EarlyServer(ours, record, parent=pid)
                      for (ours, _), record in zip(pairs[1:], records[1:])]


def close_servers(servers):
    while servers:
        servers.pop().close()


class Starts:
    """The workers of one iter() starting side by side, each in a thread of
    its own: worker i's thread begins once `forks[i]` (when given) has run
    in a coordinator thread, in order (a zygote forks one server at a
    time, so they come in the order asked: the trainer takes worker 0's
    batch first). wait(i) blocks until start i has ended, and raises what
    it raised.

    iter() does not wait for them: the iterator waits for each worker at
    its first batch, so worker 0's first batch is not held back by worker
    1's start, which may still be forking its server then. torch's iter()
    returns once its workers are forked, too, and what a worker's start
    raises comes at next()."""

    def __init__(self, starts, forks=None):
        count = len(starts)
        self._starts, self._forks = starts, forks
        self._errors = [None] * count
        self._threads = [None] * count
        self._launched = [threading.Event() for _ in range(count)]
        threading.Thread(target=self._launch_all, daemon=True,
                         name="ringloader-start").start()

    def _launch_all(self):
        for index in range(len(self._launched)):
            try:
                if self._forks is not None:
                    self._forks[index]()
                thread = threading.Thread(target=self._run, args=(index,), daemon=True,
                                          name=f"ringloader-start-{index}")
                thread.start()
                self._threads[index] = thread
            except BaseException as error:  # noqa: BLE001  (raised by wait())
                # No later worker starts either (a zygote that failed one
                # fork fails the next).
                for later in range(index, len(self._launched)):
                    self._errors[later] = error
                    self._launched[later].set()
                return
            self._launched[index].set()

    def _run(self, index):
        try:
            self._starts[index]()
        except BaseException as error:  # noqa: BLE001  (raised by wait())
            self._errors[index] = error

    def wait(self, index):
        """Blocks until start `index` has ended; raises what it raised
        (again at each call)."""
        self._launched[index].wait()
        thread = self._threads[index]
        if thread is not None:
            thread.join()
        if self._errors[index] is not None:
            raise self._errors[index]
