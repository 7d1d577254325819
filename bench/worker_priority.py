# SPDX-License-Identifier: BSD-3-Clause
"""The workers' priority beside the trainer and beside other busy processes
(LoaderOptions::worker_nice): torch's DataLoader and ringloader's at nice
+0 (the default, torch's) and +5, side by side in one run.

Cases (2 workers, batches of 32, the trainer doing torch work per batch,
as bench/clients_streams.py's digest does, on torch's intra-op threads):
  native  ringloader.datasets.TarShards over the shards with
          RandomResizedCrop(96), ToTensor, Normalize, in C++ workers;
          torch: the same shards and transforms through a WebDataset
          pipeline in its DataLoader;
  stream  the WebDataset pipeline (.decode("torchrgb")) through each
          DataLoader: Python workers on both sides;
  wake    the stream, with the trainer sleeping 1 ms three times per
          batch instead (a GPU step: it waits, wakes, launches): how long
          past each 1 ms it got a core back (p99 / longest, in ms).
Sides: torch; ringloader with worker_nice=0 (the default) and 5 (the
default on 2026-12-06). --busy N runs N processes that spin at the
trainer's priority throughout (another job on the machine). Each side
runs --epochs epochs in a fresh process; rounds are interleaved. Prints
median seconds and torch / side (> 1: faster than torch), and for wake
the median p99 / longest overshoot. Needs webdataset:

    PYTHON=/root/.cache/ringloader/venv-clients-py312/bin/python
    $PYTHON bench/worker_priority.py [--rounds 3] [--busy 0,1] [--cases native,stream,wake]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clients_streams  # noqa: E402  (the shards and the WebDataset pipeline)

SCALE = 8  # clients_streams' shards times this: 4,096 JPEGs
SIDES = {"torch": None, "nice0": {}, "nice5": {"worker_nice": 5}}


def _transform():
    import torchvision.transforms as T
    return T.Compose([T.RandomResizedCrop(96), T.ToTensor(),
                      T.Normalize([0.5] * 3, [0.25] * 3)])


def _urls(root):
    return os.path.join(root, f"shard-{{000..{clients_streams.SHARDS * SCALE - 1:03d}}}.tar")


def _loader(case, side, root):
    """torch's side never imports ringloader (its zygote would start)."""
    if side == "torch":
        import torch.utils.data
        return torch.utils.data.DataLoader(_torch_dataset(case, root),
                                           batch_size=clients_streams.BATCH,
                                           num_workers=clients_streams.WORKERS)
    import ringloader
    dataset = ringloader.datasets.TarShards(_urls(root), _transform()) \
        if case == "native" else clients_streams.dataset_for("wds", root, SCALE)
    return ringloader.DataLoader(dataset, batch_size=clients_streams.BATCH,
                                 num_workers=clients_streams.WORKERS, **SIDES[side])


def _torch_dataset(case, root):
    """For native, the same JPEGs decoded by Pillow and the same torchvision
    transforms, through WebDataset."""
    if case != "native":
        return clients_streams.dataset_for("wds", root, SCALE)
    import webdataset as wds
    return wds.WebDataset(_urls(root), shardshuffle=False, empty_check=False) \
        .decode("pil").to_tuple("jpg", "cls").map_tuple(_transform(), int)


def child(case, side, root, epochs):
    import torch
    start = time.perf_counter()
    loader = _loader("stream" if case == "wake" else case, side, root)
    samples, late = 0, []
    for _ in range(epochs):
        for images, _labels in loader:
            samples += len(images)
            if case != "wake":
                images.to(torch.float64).sum()  # the trainer's own torch work
                continue
            for _ in range(3):
                slept = time.perf_counter()
                time.sleep(0.001)
                late.append(time.perf_counter() - slept - 0.001)
    late.sort()
    print(json.dumps({"seconds": time.perf_counter() - start, "samples": samples,
                      "p99_ms": late[int(len(late) * 0.99)] * 1e3 if late else None,
                      "max_ms": late[-1] * 1e3 if late else None}))


def _busy(count):
    spin = "while True:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(count)]


def _run(case, side, root, epochs):
    command = [sys.executable, os.path.abspath(__file__), "--child", case, "--side", side,
               "--root", root, "--epochs", str(epochs)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{case} {side}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--busy", default="0,1", help="busy processes beside the run, per row")
    parser.add_argument("--cases", default="native,stream,wake")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--root", default=None, help="data folder (default: a temporary one)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--side", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.side, args.root, args.epochs)
    root = os.path.join(args.root or tempfile.mkdtemp(prefix="worker-priority-"),
                        f"scale-{SCALE}")
    os.makedirs(root, exist_ok=True)
    clients_streams.make_shards(root, SCALE)
    cases, sides = args.cases.split(","), args.sides.split(",")
    print(f"{os.cpu_count()} cores; {args.epochs} epochs of "
          f"{clients_streams.SHARDS * SCALE * clients_streams.PER_SHARD} JPEGs; "
          f"{args.rounds} rounds; median seconds (torch / side)")
    print(f"{'case':8} {'busy':>4} " + " ".join(f"{side:>16}" for side in sides))
    for busy in (int(b) for b in args.busy.split(",")):
        spinners = _busy(busy)
        try:
            times = {}
            for _ in range(args.rounds):
                for case in cases:
                    for side in sides:
                        times.setdefault((case, side), []).append(
                            _run(case, side, root, args.epochs))
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
        for case in cases:
            print(f"{case:8} {busy:>4} " + " ".join(
                f"{cell:>16}" for cell in _cells(case, sides, times)))


def _cells(case, sides, times):
    """Per side: median seconds (torch / side), or for wake the median p99
    and longest overshoot in ms."""
    def median(side, key):
        return statistics.median(run[key] for run in times[(case, side)])
    if case == "wake":
        return [f"{median(side, 'p99_ms'):.2f} / {median(side, 'max_ms'):.2f}"
                for side in sides]
    anchor = median(sides[0], "seconds") if sides[0] == "torch" else None
    return [f"{median(side, 'seconds'):7.2f}" +
            (f" ({anchor / median(side, 'seconds'):.2f}x)" if anchor else "")
            for side in sides]


if __name__ == "__main__":
    main()
