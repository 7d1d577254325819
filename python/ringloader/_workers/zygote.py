# SPDX-License-Identifier: BSD-3-Clause
"""Where Python workers come from: a clean process that forks them.

Three kinds of process, none of which is the trainer:

* the zygote: one per trainer process, made at ``import ringloader``: a
  fork of the trainer while it is still one thread with CUDA untouched, or
  else a spawned ``python -c`` (see _python_workers._Zygote). It imports
  torch, never touches CUDA, never runs the trainer's code again. For each
  loader it forks a server.
* a loader server: unpickles the loader's payload (the dataset, with
  ``__main__``'s classes by value), computes the BatchStructure of ``dataset[0]``
  (so ``__getitem__`` never runs in the trainer), answers the trainer, then
  gives one worker to each stub that connects (forked ahead as a spare
  while it has nothing else to do, or on the stub's handshake:
  _workers/worker_fork.py).
* a worker: forked from its server with the dataset already in memory, it
  runs ``ringloader._workers.worker.serve``.

The C++ WorkerPool spawns and waits on *stubs* (``ringloader-python-stub``),
so its death detection, kill and respawn stay as they are: a stub hands its
descriptors (stdio, ring, config) to the server, which forks the worker;
the server kills the worker when its stub's connection closes and sends
the worker's wait status to the stub, which ends the same way. The
zygote and the workers die with their parent (PR_SET_PDEATHSIG);
a server ends when the trainer's end of its socket closes (the trainer
dropped the loader, or died), killing its workers.

Trust: the zygote's control channel and each server's channel to its
trainer are socketpairs, inherited, with no name: no other process can
reach them. A server's listening socket has a public name, so it serves a
connection only once _stub_gate has checked who is on the other end, and
never blocks on one (a bad or silent peer costs its connection only).
"""
import gc
import os
import pickle
import select
import signal
import socket
import struct
import sys
import time
import traceback

from ringloader._workers import dataset_bytes as _dataset_bytes
from ringloader._workers import stream_renewal as _stream_renewal
from ringloader._workers.frames import recv_frame, send_frame
from ringloader._workers import stub_gate as _stub_gate
from ringloader._workers import worker_fork as _worker_fork
from ringloader._workers.fork_hygiene import (apply_header, die_with_parent,
                                              drop_inherited_descriptors,
                                              leave_trainers_signals, set_name)
from ringloader._workers.stub_gate import STUB_FDS
from ringloader._workers.library_warmup import warm_inherited_libraries

# Connections past the uid and parent checks, not yet handed over: more
# than this, and new ones are closed at once.
MAX_PENDING = 64
# Connections accepted per wake-up: a flood of connections (any uid can
# connect) then costs one batch of accepts between the server's other
# work (stubs, the trainer), not all of it.
MAX_ACCEPTS_PER_WAKE = 16


def zygote_main(control_fd, trainer_pid):
    """Forks a loader server for each descriptor the trainer sends; ends when
    the trainer's end of `control_fd` closes. Never returns: the zygote may
    be a fork of the trainer, whose atexit handlers and finalisers are not
    its own to run."""
    try:
        _zygote_loop(control_fd, trainer_pid)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        os._exit(0)


def _zygote_loop(control_fd, trainer_pid):
    die_with_parent()
    if os.getppid() != trainer_pid:
        return  # the trainer ended before the death signal was armed
    drop_inherited_descriptors({0, 1, 2, control_fd})
    set_name("rl-zygote")
    leave_trainers_signals()
    with socket.socket(fileno=control_fd) as control:
        _serve(control)


def _serve(control):
    """Imports what servers need, says ready, and forks a server per
    descriptor received until the trainer's end closes."""
    # Servers are reaped by the kernel: the zygote never waits on them.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    # What every server and worker needs, imported once here.
    import importlib
    for name in ("torch", "torch.utils.data", "ringloader._slots.batch_structure",
                 "ringloader._ringloader", "ringloader._workers.worker"):
        importlib.import_module(name)
    warm_inherited_libraries()
    try:
        control.sendall(b"R")  # ready
    except OSError:
        return  # the trainer ended while this process was importing: nothing to serve
    while True:
        try:
            # The server's channel to its trainer, and the worker end of the
            # loader's exception-record channel (_exceptions.WorkerRecords).
            message, fds, _, _ = socket.recv_fds(control, 16, 2)
        except (OSError, EOFError):
            return
        if not message or not fds:
            _close_fds(fds)
            return
        if message == b"Z":  # a loader's own zygote
            _fork_loader_zygote(control, fds)
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            control.close()
            run_server(fds[0], fds[1] if len(fds) > 1 else None)
        _close_fds(fds)


def run_server(trainer_fd, records_fd, make=None):
    """This forked process serves one loader (a LoaderServer, or what
    `make(trainer socket, records_fd)` makes: _trainer_fork's) on
    `trainer_fd`, then exits. Never returns."""
    code = 1
    server = (make or LoaderServer)(socket.socket(fileno=trainer_fd), records_fd)
    try:
        code = server.run()
    except BaseException:  # noqa: BLE001  (a forked child must not return)
        traceback.print_exc()
    finally:
        server.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _fork_loader_zygote(control, fds):
    """A loader's own zygote (_trainer/warm_zygote.py), for a trainer that
    cannot be forked itself: it sends its pid, unpickles the loader's
    dataset once (importing what it needs: the servers it forks then import
    nothing) and serves as this zygote does, on fds[0]."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        control.close()
        _close_fds(fds[1:])
        die_with_parent()
        set_name("rl-zygote")
        try:
            with socket.socket(fileno=fds[0]) as own:
                own.sendall(struct.pack("<q", os.getpid()))
                header = pickle.loads(recv_frame(own))
                apply_header(header)
                payload = recv_frame(own)
                try:
                    pickle.loads(payload)  # for its imports: the copy is dropped
                except Exception:  # noqa: BLE001  (each server reports it, as before)
                    pass
                del payload
                gc.collect()
                _serve(own)
        except BaseException:  # noqa: BLE001  (a forked child must not return)
            traceback.print_exc()
        finally:
            os._exit(0)
    _close_fds(fds)


class LoaderServer:
    """One loader's dataset, probed once, forked into its workers."""

    def __init__(self, trainer, records=None):
        self.trainer = trainer       # the loader's lifeline and channel
        self.records = records       # workers send exception records on it
        self.workers = {}            # stub connection -> worker pid
        self.orphans = set()         # stubs gone, their worker killed, not reaped
        self.pending = {}            # admitted connection -> (peer pid, deadline)
        self.listener = None
        self.wake = ()
        self.trainer_pid = self.token = None
        self.renewal_fd = None       # an IterableDataset's later epochs
        self.spares = []             # workers forked ahead of their stubs
        self.spares_forked = 0
        self.config = None           # the payload, unpickled

    def close(self):
        """Its sockets, before os._exit (else ResourceWarnings under -X dev)."""
        for sock in (self.listener, self.trainer):
            if sock is not None:
                sock.close()

    def run(self):
        # No PR_SET_PDEATHSIG here: the zygote's death (the trainer thread
        # that made it ended) must not end live loaders. The trainer's end
        # of `self.trainer` closes when it dies or drops the loader.
        set_name("rl-server")
        # Its pid: the trainer kills it should the probe below outlast the
        # workers' start timeout (worker_start_timeout_s).
        try:
            self.trainer.sendall(b"H" + struct.pack("<q", os.getpid()))
        except OSError:
            return 0  # the trainer is gone, or dropped the loader: nothing to serve
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wake = (wake_r, wake_w)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select
        self.before_load()
        reply = self._load()
        if "error" in reply:
            try:
                send_frame(self.trainer, pickle.dumps(reply))
            except OSError:
                pass  # the trainer is gone (a server asked for early, unused)
            return 0
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Abstract namespace: no file to clean up; "@" stands for its NUL on
        # the stub's command line.
        name = f"ringloader-{os.getpid()}-{os.urandom(6).hex()}"
        self.listener.bind("\0" + name)
        self.listener.listen(64)
        self.listener.setblocking(False)
        reply["address"] = "@" + name
        send_frame(self.trainer, pickle.dumps(reply))
        # The first worker's fork overlaps the trainer's start of its stub.
        self._fork_spare()
        self.after_reply()
        self._loop(wake_r)
        return 0

    def before_load(self):
        """Work to do before the payload (a subclass's)."""

    def after_reply(self):
        """Work to do once the trainer has its reply (a subclass's)."""

    def _load(self):
        """Unpickles the payload and lays out sample 0 (here, not in the
        trainer, as torch never calls __getitem__ there with workers)."""
        try:
            header_bytes = recv_frame(self.trainer)
            header = pickle.loads(header_bytes)
            apply_header(header)
            payload = recv_frame(self.trainer)
            self.trainer_pid = header["parent_pid"]
            self.token = header["stub_token"]
        except (EOFError, OSError, KeyError) as error:
            return {"error": f"ringloader: loader server: {error}", "stage": "receive"}
        stage = "unpickle"
        try:
            # A stream's dataset stays bytes here: each worker unpickles it.
            self.config = _dataset_bytes.loads_deferring(payload)
            self.config["parent_pid"] = header["parent_pid"]
            if self.config.get("iterable") is not None:
                # An IterableDataset has no sample 0 to probe (_iterable_worker).
                self.renewal_fd = self.config["renewal_fd"] = _stream_renewal.create()
                self.spares = _worker_fork.brief_spares(
                    self.spares, (header_bytes, payload, self.renewal_fd))
                return {"batch_structure": pickle.dumps(None)}
            self.spares = _worker_fork.brief_spares(self.spares, None)
            stage = "sample"
            from ringloader._slots.batch_structure import BatchStructure
            sample = self.config["dataset"][0]
            stage = "batch_structure"
            self.config["batch_structure"] = BatchStructure(sample, header["max_pickled_bytes"])
            return {"batch_structure": pickle.dumps(self.config["batch_structure"])}
        except Exception as error:  # noqa: BLE001  (reported to the trainer)
            return {"error": f"{type(error).__name__}: {error}",
                    "traceback": traceback.format_exc(), "stage": stage,
                    "exception": _picklable(error)}

    def _loop(self, wake_r):
        spare_wanted = self.spares_forked < self.config["num_workers"]
        while True:
            stubs = [s for s in self.workers if s not in self.orphans]
            # A spare is forked only when nothing is waiting (timeout 0):
            # a stub's handshake or the trainer comes first.
            readable, _, _ = select.select(
                [self.trainer, self.listener, wake_r, *stubs, *self.pending], [], [],
                0 if spare_wanted else self._until_next_deadline())
            if not readable and spare_wanted:
                spare_wanted = self._fork_spare()
                continue
            spare_wanted = self.spares_forked < self.config["num_workers"]
            # Sorted before anything moves: a connection handed over below
            # is a stub from then on, with nothing more to read.
            handshakes = [s for s in readable if s in self.pending]
            stubs_ready = [s for s in readable if s in self.workers]
            if wake_r in readable:
                while True:
                    try:
                        if not os.read(wake_r, 512):
                            break
                    except BlockingIOError:
                        break
                self._reap()
            if self.listener in readable:
                self._accept()
            for conn in handshakes:
                self._handshake(conn)
            self._drop_overdue()
            for stub in stubs_ready:
                if stub in self.workers and not _recv_or_gone(stub):
                    # The stub is gone (killed): so is its worker.
                    _kill(self.workers[stub])
                    self.orphans.add(stub)
            if self.trainer in readable and not self._trainer_message():
                self._end_workers()
                return

    def _trainer_message(self):
        """A renewal (b"N" and its frame, acknowledged with b"K") stored
        for the workers; False when the trainer is gone."""
        try:
            command = self.trainer.recv(1)
            if command == b"N" and self.renewal_fd is not None:
                _stream_renewal.store(self.renewal_fd, recv_frame(self.trainer))
                self.trainer.sendall(b"K")
        except (OSError, EOFError, ValueError):
            return False
        return bool(command)

    def _until_next_deadline(self):
        if not self.pending:
            return None
        first = min(deadline for _, deadline in self.pending.values())
        return max(0.0, first - time.monotonic())

    def _drop_overdue(self):
        now = time.monotonic()
        for conn, (_, deadline) in list(self.pending.items()):
            if deadline <= now:
                del self.pending[conn]
                conn.close()

    def _end_workers(self):
        """The trainer is gone or dropped the loader: kill the workers and
        tell their stubs (which end as quietly as the workers did)."""
        for spare in self.spares:
            spare.discard()
        for pid in self.workers.values():
            _kill(pid)
        for stub, pid in list(self.workers.items()):
            try:
                _, status = os.waitpid(pid, 0)
                stub.sendall(struct.pack("<i", status))
            except OSError:
                pass

    def _accept(self):
        """Up to MAX_ACCEPTS_PER_WAKE waiting connections (the listener
        stays readable for the rest); checks who connected before reading a
        byte (see _stub_gate). Refusals are not logged: a flood would fill
        the trainer's stderr."""
        for _ in range(MAX_ACCEPTS_PER_WAKE):
            try:
                conn, _ = self.listener.accept()
            except OSError:  # none left (EAGAIN), or none to be had now
                return
            try:
                pid = _stub_gate.admit(conn, self.trainer_pid)
            except (_stub_gate.Refused, OSError):
                conn.close()
                continue
            if len(self.pending) >= MAX_PENDING:
                conn.close()
                continue
            conn.setblocking(False)
            self.pending[conn] = (pid, time.monotonic() + _stub_gate.HANDSHAKE_TIMEOUT_S)

    def _handshake(self, conn):
        """An admitted peer's message: a worker for a valid one; anything
        else closes the connection and every descriptor it sent."""
        pid, deadline = self.pending.pop(conn)
        fds = []
        try:
            message, fds, flags, _ = socket.recv_fds(conn, _stub_gate.MESSAGE_MAX,
                                                     STUB_FDS)
            index, group = _stub_gate.parse(message, fds, flags, pid, self.token,
                                            self.config["num_workers"])
        except (BlockingIOError, InterruptedError):
            self.pending[conn] = (pid, deadline)  # woken for nothing
            return
        except (_stub_gate.Refused, OSError, ValueError):
            _stub_gate.close_all(fds)
            conn.close()
            return
        conn.setblocking(True)
        worker = None
        while self.spares and worker is None:
            spare = self.spares.pop(0)
            worker = spare.pid if spare.hand_over(index, group, fds) else None
        try:
            if worker is None:
                worker = _worker_fork.fork_worker(self, index, group, fds)
        except OSError:
            conn.close()  # the stub ends; the pool spawns another
            return
        finally:
            _stub_gate.close_all(fds)
        self.workers[conn] = worker

    def _fork_spare(self, budget=None):
        """A spare worker (_worker_fork) for the loader's first workers, one
        at a time, at most num_workers (`budget`, before the payload says)
        in the server's life (a worker the pool restarts is forked on
        demand: spares that die cannot make a fork loop); False when none
        is wanted."""
        budget = self.config["num_workers"] if budget is None else budget
        wanted = budget - len(self.workers) - len(self.spares)
        if wanted <= 0 or self.spares_forked >= budget:
            return False
        self.spares_forked += 1
        try:
            self.spares.append(_worker_fork.SpareWorker(self, briefed=self.config is not None))
        except OSError:
            return False  # forked on demand instead
        return True

    def _reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.spares = [spare for spare in self.spares if spare.pid != pid]
            for stub, worker in list(self.workers.items()):
                if worker == pid:
                    try:
                        stub.sendall(struct.pack("<i", status))
                    except OSError:
                        pass
                    stub.close()
                    del self.workers[stub]
                    self.orphans.discard(stub)


def _close_fds(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _recv_or_gone(sock):
    """False when the peer closed (or reset) `sock`."""
    try:
        return bool(sock.recv(1))
    except OSError:
        return False


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _picklable(error):
    try:
        data = pickle.dumps(error)
        pickle.loads(data)
        return data
    except Exception:  # noqa: BLE001  (the text still reaches the trainer)
        return None
