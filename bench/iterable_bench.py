# SPDX-License-Identifier: BSD-3-Clause
"""An IterableDataset through torch's DataLoader and ringloader's, beside
each other in one run (issue 32, item 5): synthetic samples of a few KB
and of ~600 KB (a 3x224x224 float32 tensor), sharded across 2 workers with
get_worker_info(), default collate. Interleaved rounds; prints each
loader's samples/s (median of the rounds) and ringloader / torch.

    PYTHONPATH=build/python /usr/bin/python3 bench/iterable_bench.py

``--keep torch|ringloader`` instead keeps every batch of 320 samples of
588 KiB (batch 16: list(loader)) and prints the trainer's resident
memory: what keeping batches costs (run once per loader, each in a
fresh process).
"""
import argparse
import statistics
import time
import warnings

import torch
from torch.utils.data import IterableDataset, get_worker_info
from torch.utils.data.dataloader import DataLoader as TorchDataLoader


class Synthetic(IterableDataset):
    """`count` samples of `shape` float32 (made, not read: the cost is the
    loader's), split across workers."""

    def __init__(self, count, shape):
        self.count, self.shape = count, shape

    def __iter__(self):
        info = get_worker_info()
        first, step = (0, 1) if info is None else (info.id, info.num_workers)
        base = torch.rand(self.shape)
        for i in range(first, self.count, step):
            sample = base.clone()
            sample[0] = float(i)  # a write, as a decode would make it
            yield sample, i


def samples_per_s(loader):
    count, start = 0, time.perf_counter()
    for data, _ in loader:
        data[-1].sum()  # touch the batch, as a trainer would
        count += data.shape[0]
    return count / (time.perf_counter() - start)


def kept_rss(which, workers):
    import ringloader
    loader_class = TorchDataLoader if which == "torch" else ringloader.DataLoader
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = list(loader_class(Synthetic(320, (3, 224, 224)), batch_size=16,
                                 num_workers=workers))
    with open("/proc/self/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    print(f"{which}: {len(kept)} batches of 16 x 588 KiB kept, trainer RSS "
          f"{rss // 1024} MiB")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", choices=("torch", "ringloader"))
    args = parser.parse_args()
    if args.keep:
        return kept_rss(args.keep, args.workers)
    import ringloader
    cases = [("small (1024 float32, 4 KiB)", (1024,), 20000, 64),
             ("large (3x224x224 float32, 588 KiB)", (3, 224, 224), 1200, 16)]
    for name, shape, count, batch_size in cases:
        rates = {"torch": [], "ringloader": []}
        for _ in range(args.rounds):
            for label, loader_class in (("torch", TorchDataLoader),
                                        ("ringloader", ringloader.DataLoader)):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    loader = loader_class(Synthetic(count, shape), batch_size=batch_size,
                                          num_workers=args.workers)
                    rates[label].append(samples_per_s(loader))
                del loader
        torch_rate = statistics.median(rates["torch"])
        ours = statistics.median(rates["ringloader"])
        print(f"{name}, batch {batch_size}, {args.workers} workers, {count} samples, "
              f"median of {args.rounds}: torch {torch_rate:.0f} samples/s, ringloader "
              f"{ours:.0f} samples/s, ratio {ours / torch_rate:.2f}")


if __name__ == "__main__":
    main()
