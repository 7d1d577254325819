# SPDX-License-Identifier: BSD-3-Clause
"""Python-side benchmarks, ringloader.DataLoader and torch's DataLoader side
by side in one run, same data, same workers, same batch size:

1. the ImageFolder JPEG pipeline (RandomResizedCrop(224) + flip + ToTensor +
   Normalize, batch 64) through ringloader's native workers;
2. the same, as an unchanged script has it: torchvision's own ImageFolder
   and Compose handed to ringloader.DataLoader, which converts them to the
   native path by itself (the drop-in case);
3. a pure-Python Dataset returning 3x224x224 float tensors: what spawned
   Python workers writing into the ring save over pickling and collating.

    /usr/bin/python3 bench/python_bench.py --build build --photos DIR [--epochs N]
"""
import argparse
import json
import os
import sys
import time


def timed(loader, epochs):
    """Images per second over `epochs` after one warm-up epoch."""
    for _ in loader:
        pass
    count, start = 0, time.perf_counter()
    for _ in range(epochs):
        for batch in loader:
            x = batch[0]
            x[0].sum()  # touch the batch, as a trainer would
            count += x.shape[0]
    return count / (time.perf_counter() - start)


class Tensors:
    """A Python dataset: 3x224x224 float32 per sample, cheap to make, so
    delivery (pickle, queue, collate) is what is measured."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        return torch.full((3, 224, 224), float(i % 255)), i % 10


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--photos", required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tensors", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved torch/ringloader rounds of the drop-in case")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import torch
    import torchvision
    import torchvision.transforms as T

    import ringloader
    torch.set_num_threads(1)
    pipeline = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    results = {}
    theirs = torch.utils.data.DataLoader(
        torchvision.datasets.ImageFolder(args.photos, pipeline), batch_size=64,
        shuffle=True, num_workers=args.workers, persistent_workers=True)
    ours = ringloader.DataLoader(ringloader.datasets.ImageFolder(args.photos, pipeline),
                                 batch_size=64, shuffle=True, num_workers=args.workers)
    results["jpeg_torch"] = timed(theirs, args.epochs)
    results["jpeg_ringloader"] = timed(ours, args.epochs)
    del ours
    unchanged = ringloader.DataLoader(
        torchvision.datasets.ImageFolder(args.photos, pipeline), batch_size=64,
        shuffle=True, num_workers=args.workers, persistent_workers=True)
    if not unchanged._converted:
        sys.exit("python_bench: torchvision's ImageFolder did not go native")
    # Rounds interleaved with torch's, so load from elsewhere hits both.
    torch_rounds, unchanged_rounds = [], []
    for _ in range(args.rounds):
        torch_rounds.append(timed(theirs, args.epochs))
        unchanged_rounds.append(timed(unchanged, args.epochs))
    results["tvds_torch"] = sorted(torch_rounds)[len(torch_rounds) // 2]
    results["tvds_ringloader"] = sorted(unchanged_rounds)[len(unchanged_rounds) // 2]
    del theirs, unchanged
    dataset = Tensors(args.tensors)
    theirs = torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=args.workers,
                                         persistent_workers=True)
    ours = ringloader.DataLoader(dataset, batch_size=64, num_workers=args.workers)
    results["pydataset_torch"] = timed(theirs, args.epochs)
    results["pydataset_ringloader"] = timed(ours, args.epochs)
    results["jpeg_ratio"] = results["jpeg_ringloader"] / results["jpeg_torch"]
    results["tvds_ratio"] = results["tvds_ringloader"] / results["tvds_torch"]
    results["pydataset_ratio"] = results["pydataset_ringloader"] / results["pydataset_torch"]
    print(json.dumps({k: round(v, 3) for k, v in results.items()}))
    print(f"Python ImageFolder JPEG pipeline: torch {results['jpeg_torch']:.0f} img/s, "
          f"ringloader {results['jpeg_ringloader']:.0f} img/s, "
          f"ratio {results['jpeg_ratio']:.2f}x")
    print(f"Unchanged torchvision ImageFolder + Compose (drop-in, median of "
          f"{args.rounds} interleaved rounds): torch {results['tvds_torch']:.0f} img/s, "
          f"ringloader {results['tvds_ringloader']:.0f} img/s, "
          f"ratio {results['tvds_ratio']:.2f}x (target >= 3x)")
    print(f"Python Dataset 3x224x224: torch {results['pydataset_torch']:.0f} img/s, "
          f"ringloader {results['pydataset_ringloader']:.0f} img/s, "
          f"ratio {results['pydataset_ratio']:.2f}x (target >= 2x)")


if __name__ == "__main__":
    main()
