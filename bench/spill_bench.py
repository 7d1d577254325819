# SPDX-License-Identifier: BSD-3-Clause
"""The cost of keeping batches (issue 13): a loop that keeps every label and
every 10th batch (metrics, stored outputs) against the plain loop that drops
each batch, same loader settings, interleaved rounds in one run. Kept
batches are spilled out of the ring once their slot is needed; the goal is
keep/plain >= 0.90.

    /usr/bin/python3 bench/spill_bench.py --build build --photos DIR
"""
import argparse
import os
import statistics
import sys
import time


def run(loader, epochs, keep):
    """Images per second over `epochs`; `keep` holds labels and every 10th
    batch of each epoch (dropped at the epoch's end, as per-epoch metrics)."""
    count, start = 0, time.perf_counter()
    for _ in range(epochs):
        labels, kept = [], []
        for step, (images, targets) in enumerate(loader):
            images[0].sum()  # touch the batch, as a trainer would
            count += images.shape[0]
            if keep:
                labels.append(targets)
                if step % 10 == 0:
                    kept.append(images)
    return count / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--photos", required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import torchvision.transforms as T

    import ringloader

    transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                           T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    dataset = ringloader.datasets.ImageFolder(args.photos, transform)
    loader = ringloader.DataLoader(dataset, batch_size=args.batch_size,
                                   num_workers=args.workers, shuffle=True)
    run(loader, 1, keep=False)  # warm-up: page cache, workers
    plain, keep = [], []
    for _ in range(args.rounds):
        plain.append(run(loader, args.epochs, keep=False))
        spilled = loader.stats()["spilled_batches"]
        keep.append(run(loader, args.epochs, keep=True))
        spills = loader.stats()["spilled_batches"] - spilled
    p, k = statistics.median(plain), statistics.median(keep)
    print(f"plain loop:                  {p:8.1f} img/s  (rounds: "
          + ", ".join(f"{v:.1f}" for v in plain) + ")")
    print(f"keep labels + every 10th:    {k:8.1f} img/s  (rounds: "
          + ", ".join(f"{v:.1f}" for v in keep) + f"; {spills} spills a round)")
    # Each round's keep run sits next to its plain run: their ratio is less
    # exposed to load drifting on a shared machine than the medians' ratio.
    paired = statistics.median(b / a for a, b in zip(plain, keep))
    print(f"keep / plain = {k / p:.3f} (medians), {paired:.3f} (median of "
          f"per-round ratios)  (goal >= 0.90; "
          f"{args.workers} workers, batch {args.batch_size}, {len(dataset)} images)")


if __name__ == "__main__":
    main()
