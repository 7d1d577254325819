# SPDX-License-Identifier: BSD-3-Clause
"""A stream's dataset inside its payload, unpickled by each worker and not
by the loader server.

The trainer pickles an IterableDataset once per ``iter()``
(_trainer/iterable.py, _PickledOnce) and the payload carries those bytes
behind ``loads`` below. A full unpickle of the payload (renewal, the
loader zygote's warm-up) calls ``loads`` and gets the dataset. A server
and the spares it briefs unpickle with ``loads_deferring``: the dataset
stays bytes (``Deferred``), and each worker unpickles its own copy as its
stream begins (_iterable_worker._Stream), as torch's spawned workers do.

Why: the server needs the configuration, not the dataset, and it
unpickled the dataset at the same moment as its spare did, on the way to
the first batch: a second cold unpickle per worker (5-13 ms of CPU on 2
cores, Hugging Face's stream) while the cores are busiest. What the
dataset's unpickling raises now reaches the trainer as the worker's
first batch's error, with its type, as a spawned torch worker's would."""
import io
import pickle


def loads(data):
    """The dataset: what a full unpickle of the payload calls."""
    return pickle.loads(data)


class Deferred:
    """The dataset's bytes, not unpickled yet."""

    def __init__(self, data):
        self.data = data

    def load(self):
        return pickle.loads(self.data)


class _DeferringUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == __name__ and name == "loads":
            return Deferred
        return super().find_class(module, name)


def loads_deferring(payload):
    """`payload` unpickled, its dataset left as a Deferred."""
    return _DeferringUnpickler(io.BytesIO(payload)).load()


def materialized(dataset):
    """The dataset itself, unpickled here if it was deferred."""
    return dataset.load() if isinstance(dataset, Deferred) else dataset
