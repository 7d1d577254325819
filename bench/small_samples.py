# SPDX-License-Identifier: BSD-3-Clause
"""Small samples through map-style Python datasets: torch's DataLoader and
ringloader.DataLoader side by side in one run (issue 30).

Each row: the same dataset, batch 64, shuffle=False, the same number of
workers (2; one row with num_workers=0), persistent workers for torch; the
second pass of each loader is timed (the first starts the workers and warms
the caches). Rows are interleaved torch / ringloader so load from elsewhere
hits both. Prints samples/s, ringloader / torch, and µs per sample per
worker (workers × 1e6 / samples per second; the trainer's own time for
num_workers=0).

    /usr/bin/python3 bench/small_samples.py --build build [--rounds 1] [--only NAME]
"""
import argparse
import json
import os
import sys
import time


class Floats:
    """32 floats + label (a tabular row)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        return torch.full((32,), float(i)), i % 10


class Image32:
    """3×32×32 floats + label (a CIFAR-sized image)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        return torch.full((3, 32, 32), float(i % 255)), i % 10


class Tokens:
    """A tokenised text sample: dict of two 128-int tensors + label."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        return {"input_ids": torch.full((128,), i, dtype=torch.int64),
                "attention_mask": torch.ones(128, dtype=torch.int64)}, i % 2


class Image224:
    """3×224×224 floats + label (an ImageNet-sized image)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        return torch.full((3, 224, 224), float(i % 255)), i % 10


def tensor_dataset(n):
    import torch
    generator = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(n, 32, generator=generator),
                                          torch.randint(0, 10, (n,), generator=generator))


def rows(scale):
    """(name, dataset, workers, ringloader's extra arguments). A
    TensorDataset runs in the C++ workers (_native/rows.py); its
    ``native=False`` row is the Python workers' gather it replaced."""
    tensors = tensor_dataset(int(100000 * scale))
    return [
        ("32 floats + label", Floats(int(32768 * scale)), 2, {}),
        ("TensorDataset 100k x 32 floats", tensors, 2, {}),
        ("TensorDataset 100k x 32 floats, Python workers (native=False)", tensors, 2,
         {"native": False}),
        ("3x32x32 floats + label", Image32(int(16384 * scale)), 2, {}),
        ("dict of two 128-int tensors + label", Tokens(int(16384 * scale)), 2, {}),
        ("3x224x224 floats + label", Image224(int(2048 * scale)), 2, {}),
        ("32 floats + label, num_workers=0", Floats(int(16384 * scale)), 0, {}),
        ("TensorDataset 100k x 32 floats, num_workers=0", tensors, 0, {}),
    ]


def second_pass(loader):
    """Samples per second of the second pass (the first one is a warm-up)."""
    for _ in loader:
        pass
    count, start = 0, time.perf_counter()
    for batch in loader:
        first = batch[0] if isinstance(batch, (list, tuple)) else batch["label"]
        if isinstance(first, dict):
            first = first["input_ids"]
        first[0].sum()  # touch the batch, as a trainer would
        count += first.shape[0]
    return count / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=1,
                        help="interleaved torch/ringloader rounds; the median is shown")
    parser.add_argument("--scale", type=float, default=1.0, help="dataset sizes × this")
    parser.add_argument("--only", default=None, help="rows whose name contains this")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import torch

    import ringloader
    torch.set_num_threads(1)
    results = []
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f}, {os.cpu_count()} cores", flush=True)
    print("| sample | torch /s | ringloader /s | ratio | torch µs/sample/worker "
          "| ringloader µs/sample/worker |")
    print("|---|---|---|---|---|---|")
    for name, dataset, workers, extra in rows(args.scale):
        if args.only and args.only not in name:
            continue
        theirs = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=False,
                                             num_workers=workers,
                                             persistent_workers=workers > 0)
        ours = ringloader.DataLoader(dataset, batch_size=64, shuffle=False,
                                     num_workers=workers, **extra)
        native = ours._converted is not None  # the C++ workers make its samples
        torch_rates, our_rates = [], []
        for _ in range(args.rounds):
            torch_rates.append(second_pass(theirs))
            our_rates.append(second_pass(ours))
        del theirs, ours
        torch_rate = sorted(torch_rates)[len(torch_rates) // 2]
        our_rate = sorted(our_rates)[len(our_rates) // 2]
        per = max(workers, 1) * 1e6
        results.append({"sample": name, "workers": workers, "torch": torch_rate,
                        "ringloader": our_rate, "ratio": our_rate / torch_rate,
                        "native": native})
        print(f"| {name}{' (native)' if native else ''} | {torch_rate:,.0f} | {our_rate:,.0f} | "
              f"{our_rate / torch_rate:.2f}× | {per / torch_rate:.1f} | "
              f"{per / our_rate:.1f} |", flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
