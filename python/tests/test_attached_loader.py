# SPDX-License-Identifier: BSD-3-Clause
"""DataLoader(attach=name) (ringloader/attached.py) as a DataLoader: every
public method works or raises a typed error that says why (issue 25), and
Ctrl-C while a lane batch is handed over loses nothing (issue 31)."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

import ringloader
from conftest import write_image_folder
from node_helpers import _name
from ringloader import transforms as T


def _dataset(root):
    return ringloader.datasets.ImageFolder(root, T.Compose([T.CenterCrop(8), T.ToTensor()]))


def _keys(batches):
    return [(x.numpy().tobytes(), y.numpy().tobytes()) for x, y in batches]


@pytest.fixture
def node(tmp_path):
    root = write_image_folder(str(tmp_path / "images"), classes=2, per_class=9)
    name = _name(f"attached-{tmp_path.name}")
    with ringloader.NodeLoader(_dataset(root), batch_size=3, num_workers=1, name=name,
                               lane_slots=2) as node:
        node.start()
        yield node


def test_every_public_method_works_or_says_why(node):
    loader = ringloader.DataLoader(attach=node.name, trainer=0, batch_size=3)
    assert type(loader).__name__ == "AttachedDataLoader"
    assert isinstance(loader, ringloader.DataLoader)
    assert isinstance(loader, torch.utils.data.DataLoader)
    assert len(loader) == 6 and loader.batch_size == 3 and loader.drop_last
    assert loader.device == "cpu" and loader.trainer == 0 and loader.attach == node.name
    assert loader.worker_pids() == []  # the workers are the node's
    assert loader.stats() == {"trainer": 0, "device": "cpu"}
    assert node.name in loader.stats_text() and "trainer 0" in loader.stats_text()
    assert loader.multiprocessing_context is None
    loader.check_worker_number_rationality()  # torch's: nothing to warn about
    # torch's attributes read as the node's loading makes them.
    assert loader.sampler is None and loader.batch_sampler is None
    assert loader.num_workers == 0 and loader.timeout == 0 and not loader.pin_memory
    with pytest.raises(ringloader.OptionError, match="belongs to its node"):
        loader.state_dict()
    with pytest.raises(ringloader.OptionError, match="belongs to its node"):
        loader.load_state_dict({"version": 2})
    loader.set_epoch(0)
    first = list(loader)
    assert len(first) == 6 and all(x.shape == (3, 3, 8, 8) for x, _ in first)
    loader.set_epoch(1)
    it = iter(loader)
    assert len(it) == 6
    assert _keys([next(it)]) == _keys(first[:1])  # no shuffle: epochs are alike


def test_a_second_iter_supersedes_the_first(node):
    loader = ringloader.DataLoader(attach=node.name, trainer=0)
    old = iter(loader)
    next(old)
    new = iter(loader)
    with pytest.raises(ringloader.Error, match="superseded"):
        next(old)
    assert len(list(new)) == 6


class _DropsOneResult:
    """The lane, as seen when Python raises a signal's exception right after
    next() returned: the result is dropped on the floor."""

    def __init__(self, lane, at):
        self._lane, self._at, self._calls = lane, at, 0

    def __getattr__(self, name):
        return getattr(self._lane, name)

    def __len__(self):
        return len(self._lane)

    def next(self):
        batch = self._lane.next()
        self._calls += 1
        if self._calls == self._at:
            del batch
            raise KeyboardInterrupt
        return batch


def test_batch_dropped_by_python_stops_the_iterator_loudly(node):
    loader = ringloader.DataLoader(attach=node.name, trainer=0)
    loader.set_epoch(0)
    reference = _keys(loader)
    loader.set_epoch(1)
    it = iter(loader)
    it._lane = _DropsOneResult(it._lane, at=3)
    got = [next(it), next(it)]
    with pytest.raises(KeyboardInterrupt):
        next(it)
    for _ in range(2):  # on every later call, not just once
        with pytest.raises(ringloader.Error, match="dropped that batch"):
            next(it)
    assert _keys(got) == reference[:2]
    loader.set_epoch(2)
    assert _keys(loader) == reference  # a new epoch is whole


# Runs in a child: the fault point's request is read once per process.
_SIGNAL_AS_TAKEN = textwrap.dedent("""
    import os, signal, sys
    import ringloader
    from ringloader import transforms as T
    signal.signal(signal.SIGINT, signal.default_int_handler)
    root, marker, name = sys.argv[1], sys.argv[2], sys.argv[3]
    dataset = ringloader.datasets.ImageFolder(
        root, T.Compose([T.CenterCrop(8), T.ToTensor()]))
    node = ringloader.NodeLoader(dataset, batch_size=3, num_workers=2, name=name,
                                 lane_slots=2).start()
    loader = ringloader.DataLoader(attach=name, trainer=0)
    key = lambda b: (b[0].numpy().tobytes(), b[1].numpy().tobytes())
    loader.set_epoch(0)
    reference = [key(b) for b in loader]
    loader.set_epoch(1)
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
    node.close()
""")


def test_sigint_as_a_lane_batch_is_taken_loses_nothing(tmp_path):
    """SIGINT raised in the trainer thread after the lane's wait ended, the
    batch already taken (fault point attached.next.handed_out): Python
    would raise KeyboardInterrupt as next() returned and drop the batch;
    the binding raises it first and keeps the batch for the next call."""
    root = write_image_folder(str(tmp_path / "images"), classes=2, per_class=9)
    marker = tmp_path / "signalled"
    marker.touch()  # disarmed until the script removes it
    package = os.path.dirname(os.path.dirname(ringloader.__file__))
    env = dict(os.environ, PYTHONPATH=package, RINGLOADER_FAULT_SIGNAL_AT=(
        f"attached.next.handed_out:{int(signal.SIGINT)}:{marker}"))
    done = subprocess.run([sys.executable, "-c", _SIGNAL_AS_TAKEN, root, str(marker),
                           _name("sigint-lane")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fired", "True", "interrupts", "1", "batches", "6",
                                   "of", "6", "same", "True"], done.stdout + done.stderr
