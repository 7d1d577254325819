# SPDX-License-Identifier: BSD-3-Clause
"""An exception raised by a Python dataset in a worker, re-raised in the
trainer with its own type, as torch's ExceptionWrapper does.

The slot's error field holds a few hundred bytes, too few for a traceback.
So the worker sends the exception's type (module and qualified name), its
text and its traceback as one JSON message on its loader's record channel:
a SOCK_SEQPACKET socketpair the trainer made for that loader server, whose
worker end only the server and its workers hold (inherited, no name, no
file). The trainer takes the record when the C++ loader raises the
batch's WorkerError, matching it by the fields the C++ side set on the
error from the ring's slot (``batch_id``, ``worker``), never by its text:
that text starts with the sample's name, which whoever made the data
chose. Nothing is written to disk, so nothing is left behind or readable
by another user, and records go with the socket when the loader is
dropped or the trainer dies.
"""
import collections
import importlib
import json
import socket
import sys

# One record message at most: a traceback's tail is cut to fit.
MAX_RECORD_BYTES = 1 << 16
_MAX_MESSAGE_CHARS = 1 << 14
# Records kept unmatched (a worker killed after it sent one, an epoch
# abandoned): the oldest go first. Failed batches in flight are bounded by
# the ring's slots, far fewer.
_MAX_KEPT = 256
# Messages read per take(): a flood cannot hold the trainer.
_MAX_DRAIN = 4096

_channel = None  # in a worker: (its loader's record socket, its ring index)


def set_worker_channel(fd, filler):
    """In a worker: where failure_message sends records, and the ring
    worker index (the slot's filler) they are sent as."""
    global _channel
    _channel = None if fd is None else (socket.socket(fileno=fd), int(filler))


class WorkerRecords:
    """The trainer's end of one loader server's record channel."""

    def __init__(self):
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._ours.setblocking(False)
        self._kept = collections.OrderedDict()

    def worker_end(self):
        """The descriptor the loader server and its workers inherit."""
        return self._theirs.fileno()

    def close_worker_end(self):
        """Once the server holds its copy: the trainer keeps none."""
        self._theirs.close()

    def close(self):
        self._theirs.close()
        self._ours.close()

    def take(self, batch_id, filler):
        """The record worker `filler` sent for `batch_id`, or None."""
        self._drain()
        return self._kept.pop((batch_id, filler), None)

    def _drain(self):
        for _ in range(_MAX_DRAIN):
            try:
                data = self._ours.recv(MAX_RECORD_BYTES + 1)
            except (BlockingIOError, InterruptedError, OSError):
                return
            record = _parsed(data)
            if record is None:
                continue
            self._kept[(record["batch_id"], record["filler"])] = record
            while len(self._kept) > _MAX_KEPT:
                self._kept.popitem(last=False)


_FIELDS = {"batch_id": int, "filler": int, "module": str, "qualname": str,
           "message": str, "traceback": str, "worker": int}


def _parsed(data):
    """A record, checked field by field; None when it is not one."""
    if not data or len(data) > MAX_RECORD_BYTES:
        return None
    try:
        record = json.loads(data)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    for name, kind in _FIELDS.items():
        if type(record.get(name)) is not kind:
            return None
    if record.get("sample") is not None and type(record["sample"]) is not int:
        return None
    return record


def _send_record(record):
    """True when the record reached the trainer's channel. Never blocks: a
    full channel (the trainer far behind) costs the record, not the worker."""
    if _channel is None:
        return False
    sock, _ = _channel
    record = dict(record, message=record["message"][:_MAX_MESSAGE_CHARS])
    while True:
        data = json.dumps(record).encode()
        if len(data) <= MAX_RECORD_BYTES or not record["traceback"]:
            break
        keep = len(record["traceback"]) // 2  # the tail: where it was raised
        record["traceback"] = record["traceback"][-keep:] if keep else ""
    if len(data) > MAX_RECORD_BYTES:
        return False
    try:
        sock.send(data, socket.MSG_DONTWAIT)
    except OSError:
        return False
    return True


def failure_message(error, text, worker, sample, batch_id, limit=390):
    """The worker's side: sends the record of `error` for the batch
    `batch_id`, and returns the slot's error text (a summary; with as much
    of the traceback as fits, for when the record could not be sent)."""
    record = {"batch_id": int(batch_id), "filler": -1 if _channel is None else _channel[1],
              "module": type(error).__module__, "qualname": type(error).__qualname__,
              "message": str(error), "traceback": text, "worker": int(worker),
              "sample": None if sample is None else int(sample)}
    if not _send_record(record):
        sys.stderr.write(f"ringloader worker {worker}: sample {sample}:\n{text}")
    what = "collating the batch" if sample is None else f"sample {sample}"
    head = f"{what}: {type(error).__name__}: {error}"[:limit // 2]
    room = limit - len(head) - 20
    tail = text[-room:] if room > 0 else ""
    return f"{head}\ntraceback (end):\n{tail}"


def from_worker(error, records):
    """The trainer's side: the exception to raise for a WorkerError, given
    the loader's WorkerRecords (None for loaders without Python workers):
    the worker's own exception when the error's batch and worker fields
    match a record it sent; `error` itself otherwise."""
    batch_id, filler = getattr(error, "batch_id", None), getattr(error, "worker", None)
    if records is None or batch_id is None or filler is None or filler < 0:
        return error
    record = records.take(batch_id, filler)
    if record is None:
        return error
    batch = f"batch {error.batch_index} of epoch {error.epoch}, pid {error.worker_pid}"
    cls = _resolve(record["module"], record["qualname"])
    from . import Error
    if cls is not None and issubclass(cls, Error):
        # ringloader's own errors already name the sample and the reason.
        message = record["message"]
        if message.startswith("ringloader: "):
            message = message[len("ringloader: "):]
        return _construct(cls, f"ringloader: {batch}: {message}") or error
    message = (f"Caught {record['qualname']} in DataLoader worker process "
               f"{record['worker']} (sample {record['sample']}, {batch}).\n"
               f"Original {record['traceback']}")
    if cls is KeyError:
        from torch._utils import KeyErrorMessage
        message = KeyErrorMessage(message)  # KeyError's str() would repr it
    made = _construct(cls, message) if cls is not None else None
    if made is None:
        from ._ringloader import WorkerError
        made = WorkerError(message)  # a RuntimeError, as torch falls back to
    return made


def _resolve(module, qualname):
    """The exception class, when it can be imported in the trainer."""
    if module == "__mp_main__":
        module = "__main__"
    try:
        value = sys.modules.get(module) or importlib.import_module(module)
        for part in qualname.split("."):
            value = getattr(value, part)
    except Exception:
        return None
    return value if isinstance(value, type) and issubclass(value, BaseException) else None


def _construct(cls, message):
    try:
        return cls(message)
    except Exception:
        return None


def dropped_by_signal(last, remedy):
    """Why an iterator stops after Python dropped a batch that next() had
    returned (a signal handler's exception raised in between): `last` is
    the (epoch, index) of the batch before it, or None."""
    which = ("the epoch's first batch" if last is None
             else f"the batch after batch {last[1]} of epoch {last[0]}")
    return (f"ringloader: an exception raised by a signal handler (Ctrl-C) arrived "
            f"just as next() returned {which}, so Python dropped that batch before "
            f"this iterator got it. Going on would skip it silently, so this "
            f"iterator stops: {remedy}")
