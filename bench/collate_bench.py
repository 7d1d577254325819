# SPDX-License-Identifier: BSD-3-Clause
"""A collate_fn that costs 20 ms of CPU a batch (MixUp, tokenising and
padding, batch-wise augmentation do real work): torch's DataLoader and
ringloader.DataLoader side by side in one run (issue 32, item 6).

Rows:
  python   a Python dataset of 3x64x64 float images; both loaders run the
           collate in their 2 workers (ringloader since round 3; before, it
           ran serially in the trainer);
  native   torchvision ImageFolder over a photo folder (RandomResizedCrop(96)
           + flip + ToTensor + Normalize); ringloader decodes it in its C++
           workers and runs the collate in the trainer (C++ workers run no
           Python), torch decodes and collates in its workers;
  unbatched  batch_size=None over the Python dataset: one sample a "batch",
           through default_convert, 2 workers.

Each loader's first pass starts its workers and is not timed; the next
`--rounds` passes are, interleaved torch / ringloader. Prints batches/s,
the ratio, and the load average.

    /usr/bin/python3 bench/collate_bench.py --build build [--photos DIR] [--batches 32]
"""
import argparse
import os
import statistics
import sys
import time

COLLATE_S = 0.020


class Images:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        return torch.full((3, 64, 64), float(i % 251)), i % 10


def costly_collate(batch):
    """default_collate plus 20 ms of CPU (spun, not slept: it competes for
    the cores as real collate work does)."""
    from torch.utils.data import default_collate
    out = default_collate(batch)
    end = time.thread_time() + COLLATE_S
    while time.thread_time() < end:
        pass
    return out


def _pass(loader):
    start = time.perf_counter()
    count = 0
    for batch in loader:
        count += 1
        del batch
    return count / (time.perf_counter() - start)


def _timed(make, rounds):
    """batches/s of each loader (median of `rounds` passes, interleaved)."""
    loaders = {name: factory() for name, factory in make.items()}
    for loader in loaders.values():
        _pass(loader)  # starts the workers
    rates = {name: [] for name in loaders}
    for _ in range(rounds):
        for name, loader in loaders.items():
            rates[name].append(_pass(loader))
    return {name: statistics.median(values) for name, values in rates.items()}


def _photo_dataset(root):
    import torchvision
    from torchvision import transforms as T
    return torchvision.datasets.ImageFolder(root, T.Compose([
        T.RandomResizedCrop(96), T.RandomHorizontalFlip(), T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--photos", help="an ImageFolder root (bench/make_photo_folder.py)")
    parser.add_argument("--batches", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import torch
    import ringloader
    batch = 16
    rows = {
        "python": (Images(batch * args.batches), dict(batch_size=batch,
                                                        collate_fn=costly_collate)),
        "unbatched": (Images(20 * args.batches), dict(batch_size=None)),
    }
    if args.photos:
        # The whole folder is an epoch: make it about batches x 16 photos.
        rows["native"] = (_photo_dataset(args.photos),
                          dict(batch_size=batch, collate_fn=costly_collate))
    for name, (dataset, kwargs) in rows.items():
        kwargs = dict(kwargs, num_workers=2, persistent_workers=True)
        rates = _timed({
            "torch": lambda: torch.utils.data.DataLoader(dataset, **kwargs),
            "ringloader": lambda: ringloader.DataLoader(dataset, **kwargs)}, args.rounds)
        print(f"{name:10s} torch {rates['torch']:8.1f} batches/s  ringloader "
              f"{rates['ringloader']:8.1f} batches/s  ratio "
              f"{rates['ringloader'] / rates['torch']:.2f}  (load {os.getloadavg()[0]:.1f})",
              flush=True)


if __name__ == "__main__":
    main()
