#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""One shuffled epoch over `pipe:` tar shards read with ringloader's full
shard index against a plain wids index of the same shards (counts only:
workers find each sample by streaming its shard, docs/tar_shards.md, "A
plain wids index"), side by side in one run: img/s and the ratio.

Uses the data bench/shard_start.py builds (run it first; --data names its
folder), read through `pipe:cat` (no throttle: the stream's own cost is
what differs). Resize((16, 16)) + ToTensor, batch 32, --workers workers,
shuffle=True with shuffle_buffer --buffer, --repeats epochs each, sides
alternated, medians printed.

    nice -n 19 /usr/bin/python3 bench/counts_index_epoch.py --data /tmp/ringloader-shard-start-32
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from shard_start import tool, write_counts_index  # noqa: E402


def run_side(urls, index, workers, buffer):
    import ringloader
    from ringloader import transforms as T
    transform = T.Compose([T.Resize((16, 16)), T.ToTensor()])
    dataset = ringloader.datasets.TarShards(urls, transform, index=index, shuffle_buffer=buffer)
    loader = ringloader.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=workers,
                                   seed=1)
    start = time.monotonic()
    samples = sum(len(y) for _, y in loader)
    return {"samples": samples, "seconds": time.monotonic() - start}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="/tmp/ringloader-shard-start-32")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--buffer", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--side", nargs=2)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side[0], args.side[1], args.workers, args.buffer)))
        return
    shards = os.path.join(args.data, "shards")
    names = sorted(f for f in os.listdir(shards) if f.endswith(".tar"))
    if not names:
        sys.exit(f"no shards in {shards}: run bench/shard_start.py --data {args.data} first")
    urls = f"pipe:cat {shards}/train-{{000000..{len(names) - 1:06d}}}.tar"
    full = os.path.join(args.data, "cat-index.json")
    subprocess.run([tool(), "--index-only", full, urls], check=True, stdout=subprocess.DEVNULL)
    counts = write_counts_index(full, os.path.join(args.data, "cat-wids.json"))
    sides = {"full index": full, "plain wids index (counts only)": counts}
    rates = {name: [] for name in sides}
    env = dict(os.environ)
    built = os.path.join(os.path.dirname(HERE), "build", "python")
    if os.path.isdir(built):  # else the installed ringloader
        env["PYTHONPATH"] = built
    for _ in range(args.repeats):
        for name, index in sides.items():
            out = subprocess.run([sys.executable, __file__, "--data", args.data, "--workers",
                                  str(args.workers), "--buffer", str(args.buffer),
                                  "--side", urls, index],
                                 env=env, check=True, capture_output=True, text=True).stdout
            run = json.loads(out.splitlines()[-1])
            rates[name].append(run["samples"] / run["seconds"])
    print(f"{len(names)} pipe:cat shards, {run['samples']} samples, {args.workers} workers, "
          f"shuffle_buffer {args.buffer}, median of {args.repeats}")
    print("| | img/s | vs full index | each run |\n|---|---|---|---|")
    base = statistics.median(rates["full index"])
    for name, values in rates.items():
        rate = statistics.median(values)
        each = ", ".join(f"{v:.0f}" for v in values)
        print(f"| {name} | {rate:.0f} | {rate / base:.2f}x | {each} |")


if __name__ == "__main__":
    main()
