# SPDX-License-Identifier: BSD-3-Clause
"""Ctrl-C that lands after the wait, while a batch is on its way to the
caller (issue 31: the soak's `ctrl_c` fault lost a batch and shifted the
rest). Going on with the same iterator must lose nothing, or, in the one
instant where Python itself drops the batch, raise on the next next()."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

import ringloader
from conftest import write_image_folder
from ringloader import transforms as T


@pytest.fixture(autouse=True)
def python_sigint_handler():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _loader(root, **kwargs):
    dataset = ringloader.datasets.ImageFolder(
        root, T.Compose([T.CenterCrop(8), T.ToTensor()]))
    return ringloader.DataLoader(dataset, batch_size=3, num_workers=2,
                                 persistent_workers=True, timeout=20, **kwargs)


def _keys(batches):
    return [(x.numpy().tobytes(), y.numpy().tobytes()) for x, y in batches]


# Runs in a child: the fault point's request is read once per process.
_SIGNAL_AS_TAKEN = textwrap.dedent("""
    import os, signal, sys
    import ringloader
    from ringloader import transforms as T
    signal.signal(signal.SIGINT, signal.default_int_handler)
    root, marker = sys.argv[1], sys.argv[2]
    dataset = ringloader.datasets.ImageFolder(
        root, T.Compose([T.CenterCrop(8), T.ToTensor()]))
    loader = ringloader.DataLoader(dataset, batch_size=3, num_workers=2,
                                   persistent_workers=True, timeout=20)
    key = lambda b: (b[0].numpy().tobytes(), b[1].numpy().tobytes())
    reference = [key(b) for b in loader]
    got, interrupts, it = [], 0, iter(loader)
    while True:
        if len(got) == 4 and not interrupts and os.path.exists(marker):
            os.remove(marker)  # arms the fault for the next batch taken
        try:
            batch = next(it)
        except StopIteration:
            break
        except KeyboardInterrupt:
            interrupts += 1
            continue  # the same iterator goes on
        got.append(key(batch))
    print("fired", os.path.exists(marker), "interrupts", interrupts, "batches",
          len(got), "of", len(reference), "same", got == reference)
""")


def test_sigint_as_the_batch_is_taken_loses_nothing(tmp_path):
    """SIGINT raised in the trainer thread after the wait ended, the batch
    already taken from the ring (fault point next.handed_out): Python would
    raise KeyboardInterrupt as next() returned and drop the batch; the
    binding raises it first and keeps the batch for the next call."""
    root = write_image_folder(str(tmp_path / "images"), classes=2, per_class=9)
    marker = tmp_path / "signalled"
    marker.touch()  # disarmed until the script removes it
    package = os.path.dirname(os.path.dirname(ringloader.__file__))
    env = dict(os.environ, PYTHONPATH=package, RINGLOADER_FAULT_SIGNAL_AT=(
        f"next.handed_out:{int(signal.SIGINT)}:{marker}"))
    done = subprocess.run([sys.executable, "-c", _SIGNAL_AS_TAKEN, root, str(marker)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fired", "True", "interrupts", "1", "batches", "6",
                                   "of", "6", "same", "True"], done.stdout + done.stderr


def test_ctrl_c_while_a_batch_is_finished_loses_nothing(tmp_path):
    """A KeyboardInterrupt raised while the batch is being finished (here in
    collate_fn, as a Ctrl-C landing there would be): the same iterator then
    gives that batch again, and the rest."""
    root = write_image_folder(str(tmp_path / "images"), classes=2, per_class=9)
    calls = []

    def collate(samples):
        calls.append(len(samples))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return torch.utils.data.default_collate(samples)

    reference = _keys(_loader(root))
    it = iter(_loader(root, collate_fn=collate))
    got, interrupts = [], 0
    while True:
        try:
            got.append(next(it))
        except StopIteration:
            break
        except KeyboardInterrupt:
            interrupts += 1
    assert interrupts == 1
    assert _keys(got) == reference


class _DropsOneResult:
    """The native loader, as seen when Python raises a signal's exception
    right after next() returned: the result is dropped on the floor."""

    def __init__(self, native, at):
        self._native, self._at, self._calls = native, at, 0

    def __getattr__(self, name):
        return getattr(self._native, name)

    def next(self):
        batch = self._native.next()
        self._calls += 1
        if self._calls == self._at:
            del batch
            raise KeyboardInterrupt
        return batch


def test_batch_dropped_by_python_stops_the_iterator_loudly(tmp_path):
    root = write_image_folder(str(tmp_path / "images"), classes=2, per_class=9)
    loader = _loader(root)
    reference = _keys(loader)
    it = iter(loader)
    it._native = _DropsOneResult(it._native, at=3)
    got = [next(it), next(it)]
    with pytest.raises(KeyboardInterrupt):
        next(it)
    for _ in range(2):  # on every later call, not just once
        with pytest.raises(ringloader.Error, match="dropped that batch"):
            next(it)
    assert _keys(got) == reference[:2]
    # A new epoch is whole.
    assert _keys(loader) == reference


def test_state_dict_after_an_interrupted_take_does_not_count_the_batch(tmp_path):
    """A batch put back was not handed out: a state saved then resumes with it."""
    root = write_image_folder(str(tmp_path / "images"), classes=2, per_class=9)
    calls = []

    def collate(samples):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return torch.utils.data.default_collate(samples)

    loader = _loader(root, collate_fn=collate)
    reference = _keys(_loader(root))
    it = iter(loader)
    next(it), next(it)
    with pytest.raises(KeyboardInterrupt):
        next(it)
    state = loader.state_dict()
    assert state["batches_consumed"] == 2
    resumed = _loader(root)
    resumed.load_state_dict(state)
    assert _keys(resumed) == reference[2:]
