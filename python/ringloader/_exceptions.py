# SPDX-License-Identifier: BSD-3-Clause
"""An exception raised by a Python dataset in a worker, re-raised in the
trainer with its own type, as torch's ExceptionWrapper does.

The slot's error field holds a few hundred bytes, too few for a traceback.
So the worker writes the exception's type (module and qualified name), its
text and its traceback to a small file beside the ring, and names the file
in the error field; the trainer's iterator reads it back (and removes it)
when the C++ loader raises the batch's WorkerError.
"""
import atexit
import glob
import importlib
import os
import pickle
import re
import sys
import tempfile
import uuid

_MARKER = re.compile(r"\[python-exception ([^\]]+)\] ?")


def _record_path(parent_pid, name):
    return os.path.join(tempfile.gettempdir(), f"ringloader-{parent_pid}-exception-{name}")


@atexit.register
def _forget_unread():
    """Records of failed batches the trainer never asked for (an epoch
    abandoned, a loader dropped) go when the trainer exits."""
    for path in glob.glob(_record_path(os.getpid(), "*.pickle")):
        try:
            os.unlink(path)
        except OSError:
            pass


def failure_message(error, text, worker, sample, parent_pid, limit=390):
    """The worker's side: the error field's text, naming the record file
    when it could be written (else as much of the traceback as fits)."""
    record = {"module": type(error).__module__, "qualname": type(error).__qualname__,
              "message": str(error), "traceback": text, "worker": worker,
              "sample": sample}
    marker = ""
    try:
        path = _record_path(parent_pid, f"{uuid.uuid4().hex}.pickle")
        with open(path + ".part", "wb") as f:
            pickle.dump(record, f)
        os.rename(path + ".part", path)
        marker = f"[python-exception {path}] "
    except OSError:
        sys.stderr.write(f"ringloader worker {worker}: sample {sample}:\n{text}")
    what = "collating the batch" if sample is None else f"sample {sample}"
    head = f"{marker}{what}: {type(error).__name__}: {error}"[:limit // 2 + len(marker)]
    room = limit - len(head) - 20
    tail = text[-room:] if room > 0 else ""
    return f"{head}\ntraceback (end):\n{tail}"


def from_worker(error):
    """The trainer's side: the exception to raise for a WorkerError whose
    message names a record file; `error` itself when it names none."""
    text = str(error)
    match = _MARKER.search(text)
    if match is None:
        return error
    path = match.group(1)
    try:
        with open(path, "rb") as f:
            record = pickle.load(f)
        os.unlink(path)
    except (OSError, pickle.PickleError, EOFError):
        return type(error)(_MARKER.sub("", text))
    batch = text[:match.start()].rstrip(": ")
    if batch.startswith("ringloader: "):
        batch = batch[len("ringloader: "):]
    batch = re.sub(r" \(worker \d+, (pid \d+)\)", r", \1", batch)
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
