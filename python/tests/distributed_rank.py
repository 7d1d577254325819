# SPDX-License-Identifier: BSD-3-Clause
"""One rank of test_distributed.py's gloo job: builds ringloader.DataLoaders
that read RANK / WORLD_SIZE, gathers every rank's sample indices with
torch.distributed and (rank 0) writes them as JSON.

    RANK=r WORLD_SIZE=w MASTER_ADDR=127.0.0.1 MASTER_PORT=p \\
        python3 distributed_rank.py IMAGE_FOLDER OUT.json
"""
import json
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler

import ringloader
from ringloader import transforms as T
from index_dataset import IndexDataset


def indices_of(loader, epoch):
    loader.set_epoch(epoch)
    return [[int(i) for i in labels] for _, labels in loader]


def main(root, out):
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    folder = ringloader.datasets.ImageFolder(root)
    # Labels = sample indices, so each batch says which samples it holds.
    native = ringloader.datasets.FileList(
        [(path, i) for i, (path, _) in enumerate(folder.samples)],
        T.Compose([T.CenterCrop(8), T.ToTensor()]))
    runs = {}
    python = IndexDataset(len(native))
    # (Python workers start slowly: that kind runs once, shuffled.)
    for name, dataset, workers, shuffles in (
            ("native", native, 1, (False, True)),
            ("python", python, 1, (True,)),
            ("python_in_process", python, 0, (False, True))):
        for shuffle in shuffles:
            loader = ringloader.DataLoader(dataset, batch_size=3, shuffle=shuffle,
                                           num_workers=workers, distributed=True)
            assert (loader.rank, loader.world_size) == (rank, world)
            epochs = [indices_of(loader, epoch) for epoch in range(2)]
            assert all(len(batches) == len(loader) for batches in epochs)
            runs[f"{name} shuffle={shuffle}"] = epochs
            del loader
    torch_order = list(DistributedSampler(range(len(native)), num_replicas=world,
                                          rank=rank, shuffle=False))
    gathered = [None] * world
    dist.all_gather_object(gathered, {"runs": runs, "torch_order": torch_order})
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"size": len(native), "ranks": gathered}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
