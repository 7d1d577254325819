# SPDX-License-Identifier: BSD-3-Clause
"""The photo pipeline through the public Python API, torch's DataLoader and
ringloader's (exact and fast mode) in one run, rounds interleaved so that
load from elsewhere hits all three alike.

Each corpus row: torchvision's ImageFolder + RandomResizedCrop(224) + flip +
ToTensor + Normalize in torch.utils.data.DataLoader, against
ringloader.DataLoader over ringloader.datasets.ImageFolder with the same
Compose (exact) and with Compose(..., mode="fast"). Same workers, batch size
and shuffling; each loader is warmed up by one epoch, then every round times
`--epochs` epochs of each. Medians of the rounds, and the ratio of medians.

    /usr/bin/python3 bench/photo_speed.py --build build \
        --corpus imagenet=DIR [--corpus uniform=DIR2] [--rounds 3]

A row NAME=DIR,SHARDS (SHARDS a tar pattern, e.g. written by
`ringloader-shard DIR ... --max-side 320`) keeps torch on the folder DIR, as
a user's script has it, while ringloader reads the shards: the FFCV-style
lever of storing photos re-encoded. `--sides fast` times only torch and fast.

Make the corpora with bench/make_photo_folder.py (--preset imagenet for the
ImageNet-sized one).
"""
import argparse
import json
import os
import statistics
import sys
import time

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def timed(loader, epochs):
    count, start = 0, time.perf_counter()
    for _ in range(epochs):
        for images, _labels in loader:
            images[0].sum()  # touch the batch, as a trainer would
            count += images.shape[0]
    return count / (time.perf_counter() - start)


def loaders(root, shards, args):
    import torch
    import torchvision
    import torchvision.transforms as T
    import ringloader
    import ringloader.transforms as R

    theirs = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                        T.ToTensor(), T.Normalize(MEAN, STD)])

    def ours(mode):
        return R.Compose([R.RandomResizedCrop(224), R.RandomHorizontalFlip(),
                          R.ToTensor(), R.Normalize(MEAN, STD)], mode=mode)

    def dataset(mode):
        if shards:
            return ringloader.datasets.TarShards(shards, ours(mode))
        return ringloader.datasets.ImageFolder(root, ours(mode))

    common = dict(batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    sides = {"torch": torch.utils.data.DataLoader(
        torchvision.datasets.ImageFolder(root, theirs), persistent_workers=True, **common)}
    for mode in args.sides:
        sides[mode] = ringloader.DataLoader(dataset(mode), **common)
    return sides


def measure(name, root, shards, args):
    sides = loaders(root, shards, args)
    for loader in sides.values():
        timed(loader, 1)  # warm-up: workers started, caches filled
    rounds = {side: [] for side in sides}
    for _ in range(args.rounds):
        for side, loader in sides.items():
            rounds[side].append(timed(loader, args.epochs))
    median = {side: statistics.median(values) for side, values in rounds.items()}
    return {"corpus": name, "root": root, "shards": shards, "img_per_s": median,
            "rounds": rounds,
            "ratio": {side: median[side] / median["torch"] for side in args.sides}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--corpus", action="append", required=True,
                        help="NAME=DIR, repeatable")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--sides", default="exact,fast",
                        help="ringloader modes to time beside torch")
    args = parser.parse_args()
    args.sides = args.sides.split(",")
    sys.path.insert(0, os.path.join(args.build, "python"))
    import torch
    torch.set_num_threads(1)
    print(f"machine: {os.cpu_count()} cores, load average "
          f"{open('/proc/loadavg').read().split()[:3]}", file=sys.stderr)
    results = []
    for spec in args.corpus:
        name, paths = spec.split("=", 1)
        root, _, shards = paths.partition(",")
        results.append(measure(name, root, shards or None, args))
    print(json.dumps(results))
    print("| corpus | torch img/s | " + " | ".join(f"{s} img/s" for s in args.sides) +
          " | " + " | ".join(args.sides) + " |")
    print("|---" * (1 + 2 * len(args.sides) + 1) + "|")
    for r in results:
        m = r["img_per_s"]
        print(f"| {r['corpus']} | {m['torch']:.0f} | " +
              " | ".join(f"{m[s]:.0f}" for s in args.sides) + " | " +
              " | ".join(f"{r['ratio'][s]:.2f}x" for s in args.sides) + " |")


if __name__ == "__main__":
    main()
