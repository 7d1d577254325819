#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Remote pipe: shards: TarShards defaults beside WebDataset (issue 46, item 1).

  PY bench/remote_shards.py [--latency 0.5] [--sizes 64x40,1000x4] [--which both]

PY is a Python with ringloader and (for WebDataset) webdataset, e.g. the
clients venv. Shards are made from a photo folder (bench/make_photo_folder.py,
small photos so decoding does not hide the latency). Each shard is read
through "pipe:sh fetch.sh SHARD", an object-store stand-in that waits
--latency seconds before the first byte, logs the shard and cats it.

Per shard size (SAMPLESxSHARDS), one after the other in one run, 2 workers,
batch 32, Resize(64)+CenterCrop(64)+ToTensor:
  * WebDataset: WebDataset(urls, shardshuffle=True).shuffle(1000), PIL
    decode, torch DataLoader;
  * ringloader: TarShards(urls, transform) with its defaults (no index, no
    cache_dir), ringloader.DataLoader(shuffle=True).
Reported: first batch and first epoch (from building the dataset), the
second epoch, and how often the shards' commands ran (the fetch log), with
ringloader / WebDataset ratios (< 1: ringloader is faster). Table on stderr,
JSON on stdout.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FETCH = """#!/bin/sh
sleep {latency}
echo "$1" >> '{log}'
cat "$1"
"""


def make_shards(work, photos, samples, shards, build):
    out = os.path.join(work, f"shards-{samples}")
    os.makedirs(out)
    subprocess.run([os.path.join(build, "ringloader-shard"), photos,
                    os.path.join(out, "s-%04d.tar"), "--max-count", str(samples),
                    "--shuffle", "--seed", "0"], check=True, stdout=subprocess.DEVNULL)
    names = sorted(n for n in os.listdir(out) if n.endswith(".tar"))[:shards]
    return [os.path.join(out, n) for n in names]


def fetches(log):
    if not os.path.exists(log):
        return 0
    with open(log) as f:
        return len(f.read().split())


def timed_epochs(make_loader, epochs):
    """(first batch s, first epoch s, later epoch s), timed from making the
    dataset."""
    start = time.perf_counter()
    loader = make_loader()
    first = None
    times = []
    for _ in range(epochs):
        for _batch in loader:
            if first is None:
                first = time.perf_counter() - start
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
    del loader
    return first, times


def webdataset_loader(urls):
    import torch
    import webdataset as wds
    from torchvision import transforms as T
    transform = T.Compose([T.Resize(64), T.CenterCrop(64), T.ToTensor()])
    dataset = (wds.WebDataset(urls, shardshuffle=True, empty_check=False).shuffle(1000)
               .decode("pil").to_tuple("jpg", "cls").map_tuple(transform, int))
    return torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=2)


def ringloader_loader(urls):
    import ringloader
    from ringloader import transforms as T
    transform = T.Compose([T.Resize(64), T.CenterCrop(64), T.ToTensor()])
    dataset = ringloader.datasets.TarShards(urls, transform)
    return ringloader.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2, seed=0)


def run_case(which, urls, log, epochs):
    if os.path.exists(log):
        os.unlink(log)
    make = webdataset_loader if which == "webdataset" else ringloader_loader
    first, times = timed_epochs(lambda: make(urls), epochs)
    return {"loader": which, "first_batch_s": round(first, 2),
            "epoch_s": [round(t, 2) for t in times], "commands": fetches(log)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--sizes", default="64x40,1000x4")
    parser.add_argument("--which", choices=["both", "ringloader", "webdataset"], default="both")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--photos", default="/tmp/ringloader-bench/photos-small-4000")
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    need = max(a * b for a, b in sizes)
    subprocess.run([sys.executable, os.path.join(HERE, "make_photo_folder.py"), args.photos,
                    "--classes", "10", "--per-class", str((need + 9) // 10),
                    "--min-side", "96", "--max-side", "192"], check=True)
    work = tempfile.mkdtemp(prefix="ringloader-remote-bench-")
    log = os.path.join(work, "fetches.log")
    with open(os.path.join(work, "fetch.sh"), "w") as f:
        f.write(FETCH.format(latency=args.latency, log=log))
    which = ["webdataset", "ringloader"] if args.which == "both" else [args.which]
    # Imports outside the timings (torch's dominates a first import).
    import torch  # noqa: F401
    for name in which:
        __import__(name)
    results = []
    for samples, count in sizes:
        shards = make_shards(work, args.photos, samples, count, args.build)
        urls = [f"pipe:sh {work}/fetch.sh {s}" for s in shards]
        row = {"samples_per_shard": samples, "shards": len(shards)}
        for name in which:
            row[name] = run_case(name, urls, log, args.epochs)
            r = row[name]
            print(f"{samples:5d} x {len(shards):3d} {name:10s}: first batch "
                  f"{r['first_batch_s']:6.2f} s, epochs {r['epoch_s']} s, "
                  f"{r['commands']} commands", file=sys.stderr)
        if len(which) == 2:
            w, r = row["webdataset"], row["ringloader"]
            row["ratio_first_batch"] = round(r["first_batch_s"] / w["first_batch_s"], 2)
            row["ratio_first_epoch"] = round(r["epoch_s"][0] / w["epoch_s"][0], 2)
            print(f"{'':13s} ringloader / WebDataset: first batch {row['ratio_first_batch']}, "
                  f"first epoch {row['ratio_first_epoch']}", file=sys.stderr)
        results.append(row)
    print(json.dumps({"latency_s": args.latency, "cores": os.cpu_count(),
                      "load_average": open("/proc/loadavg").read().split()[:3],
                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
