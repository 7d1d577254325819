# SPDX-License-Identifier: BSD-3-Clause
"""A trainer that forks (os.fork: a helper process, multiprocessing's fork
start method) must not touch its loader's shared state from the child:
neither its workers (a shutdown) nor its slots (a batch freed by the child's
garbage collector), nor the threads and shard commands it started. The
parent's epoch stays identical to torch's."""
import gc
import os

import torch

import ringloader
from conftest import write_image_folder


class Numbers(torch.utils.data.Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        return torch.full((4,), float(i)), i


def _check_parent_goes_on(make_ours, make_torch):
    reference = [(x.clone(), y.clone()) for x, y in make_torch()]
    loader = make_ours()
    iterator = iter(loader)
    held = next(iterator)
    kept = held[0].clone()
    pids = loader.worker_pids()
    child = os.fork()
    if child == 0:
        # What the child's exit does: its copies of the batch, the iterator
        # and the loader are collected (this frame holds the only ones).
        code = 1
        try:
            del held, iterator, loader
            gc.collect()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    got = [held] + [(x.clone(), y.clone()) for x, y in iterator]
    # The held batch's slot was not handed back by the child: not overwritten.
    assert torch.equal(held[0], kept)
    assert len(got) == len(reference)
    for (x, y), (rx, ry) in zip(got, reference):
        assert torch.equal(x, rx) and torch.equal(y, ry)
    assert loader.worker_pids() == pids
    assert loader.stats()["worker_restarts"] == 0


def test_fork_child_leaves_native_workers_and_slots_alone(tmp_path):
    import torchvision
    from torchvision import transforms as T
    folder = write_image_folder(str(tmp_path / "images"), classes=3, per_class=8)
    pipeline = T.Compose([T.CenterCrop(16), T.ToTensor()])
    _check_parent_goes_on(
        lambda: ringloader.DataLoader(ringloader.datasets.ImageFolder(folder, pipeline),
                                      batch_size=4, num_workers=2, ring_slots=3),
        lambda: torch.utils.data.DataLoader(
            torchvision.datasets.ImageFolder(folder, pipeline), batch_size=4))


def test_fork_child_leaves_python_workers_and_slots_alone():
    _check_parent_goes_on(
        lambda: ringloader.DataLoader(Numbers(), batch_size=4, num_workers=2,
                                      ring_slots=3),
        lambda: torch.utils.data.DataLoader(Numbers(), batch_size=4))


def test_fork_child_leaves_shard_indexing_and_commands_alone(tmp_path):
    """pipe: shards still being indexed at the fork: the loader's copy in
    the child names the parent's indexing threads and shard commands.
    Before, the child's collector joined threads it does not have (SIGSEGV)
    and would SIGTERM the parent's commands."""
    from test_remote_shard_defaults import make_shards
    shards = make_shards(tmp_path, 4, 64)
    log = tmp_path / "runs.log"
    fetch = tmp_path / "fetch.sh"
    fetch.write_text(f'sleep 0.2\necho "$1" >> {log}\ncat "$1"\n')
    pipeline = ringloader.transforms.Compose([ringloader.transforms.Resize((8, 8)),
                                              ringloader.transforms.ToTensor()])

    def loader_of(urls):
        return ringloader.DataLoader(ringloader.datasets.TarShards(urls, pipeline),
                                     batch_size=4, num_workers=2, ring_slots=3)
    _check_parent_goes_on(lambda: loader_of([f"pipe:sh {fetch} {s}" for s in shards]),
                          lambda: loader_of(shards))
    assert sorted(log.read_text().split()) == sorted(shards), "a command ran twice"
