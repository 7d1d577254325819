# SPDX-License-Identifier: BSD-3-Clause
"""The next epoch of a non-persistent loader over an IterableDataset, for
the worker processes it keeps (_trainer/iterable.py).

torch starts new workers at each ``iter()``: a fresh copy of the dataset
as it is then, a new base seed, ``worker_init_fn`` run again. Starting
processes is what made such epochs slower than torch's (a server fork, a
stub's interpreter, a worker fork and its copy-on-write warm-up, per
worker and epoch), so the processes stay and get all of that instead:
the trainer sends the epoch's payload (pickled as torch pickles it for a
new worker) to the loader server, which stores it in a memfd that its
workers inherit; a worker reads it at the first task of that iteration
(_workers/iterable_worker.py) and starts over from it.

Layout of the memfd, written by the server only: iteration (u64), payload
length (u64), payload. The server writes a newer iteration only after the
trainer moved on from the older one, so a reader that sees the header
change under it was reading for an abandoned iteration: it gets None, as
a persistent worker does (whose iterations have no renewal)."""
import os
import pickle
import struct

_HEADER = struct.Struct("<QQ")


def frame(iteration, payload):
    """What the trainer sends the server: `payload` for `iteration`."""
    return _HEADER.pack(iteration, len(payload)) + payload


def create():
    """The server's memfd (inherited by the workers it forks)."""
    return os.memfd_create("ringloader-renewal", os.MFD_CLOEXEC)


def store(fd, data):
    """The server: `data` (a frame() from the trainer) into the memfd."""
    if len(data) < _HEADER.size:
        raise ValueError("ringloader: a renewal frame shorter than its header")
    _, length = _HEADER.unpack_from(data)
    if length != len(data) - _HEADER.size:
        raise ValueError("ringloader: a renewal frame whose length is not its payload's")
    os.ftruncate(fd, 0)
    view, written = memoryview(data), 0
    while written < len(data):
        written += os.pwrite(fd, view[written:], written)


def load(fd, iteration):
    """The worker: the configuration stored for `iteration`, or None when
    there is none (persistent workers) or a newer one is being written."""
    header = os.pread(fd, _HEADER.size, 0)
    if len(header) < _HEADER.size:
        return None
    stored, length = _HEADER.unpack(header)
    # The length is read from shared memory: checked against the file.
    if stored != iteration or length > os.fstat(fd).st_size - _HEADER.size:
        return None
    payload = bytearray()
    while len(payload) < length:
        chunk = os.pread(fd, length - len(payload), _HEADER.size + len(payload))
        if not chunk:
            return None
        payload += chunk
    if os.pread(fd, _HEADER.size, 0) != header:
        return None
    return pickle.loads(payload)
