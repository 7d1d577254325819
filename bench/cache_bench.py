#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Shard cache vs today's streaming, for pipe: shards (issue 16, item 2).

  /usr/bin/python3 bench/cache_bench.py [--photos DIR] [--epochs 3] [--latency 0.1]

Shards are made from a photo folder (bench/make_photo_folder.py, 400 JPEGs,
5 shards of 80 by default). Each is read through "pipe:sh fetch.sh SHARD": an
object-store stand-in that waits --latency seconds (first-byte latency),
logs its shard's size, and cats it. For 2 and 4 workers, "stream" (no
cache: each worker streams what it reads, as before) and "cache"
(TarShards(cache_dir=...), fresh folder) run --epochs shuffled epochs with
RandomResizedCrop(224)+flip+ToTensor+Normalize, batch 32, a trainer that
only takes batches. Reported: fetches and bytes fetched while indexing and
during the epochs (from the log: every command run counts, finished or
not; bytes are the whole shard's size per run, an upper bound when a
streaming worker stops a command early), images/s over the epochs (wall
time of the epochs only). A third mode, "cache, limit", keeps room for 3
of the 5 shards, so every epoch fetches again, prefetch_shards=1 ahead.
Prints a table (stderr) and JSON (stdout).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SHUFFLE_BUFFER = 40
HERE = os.path.dirname(os.path.abspath(__file__))
FETCH = """#!/bin/sh
sleep {latency}
echo "$(stat -c %s "$1")" >> '{log}'
cat "$1"
"""


def log_figures(log):
    if not os.path.exists(log):
        return 0, 0
    sizes = [int(x) for x in open(log).read().split()]
    return len(sizes), sum(sizes)


def run(pattern, log, workers, epochs, cache_dir, limit=None, prefetch=2):
    import ringloader
    from ringloader import transforms as T
    pipeline = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    extra = {"cache_dir": cache_dir} if cache_dir else {}
    if limit:
        extra["cache_limit_bytes"] = limit
        extra["prefetch_shards"] = prefetch
    if os.path.exists(log):
        os.unlink(log)
    start = time.perf_counter()
    # A buffer of one shard's samples: the order walks the shards (as with
    # ~1 GB shards and the default buffer of 1000).
    dataset = ringloader.datasets.TarShards(pattern, pipeline, shuffle_buffer=SHUFFLE_BUFFER, **extra)
    index_s = time.perf_counter() - start
    index_fetches, index_bytes = log_figures(log)
    loader = ringloader.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=workers,
                                   seed=1)
    images = 0
    start = time.perf_counter()
    for _ in range(epochs):
        for x, _ in loader:
            images += x.shape[0]
    seconds = time.perf_counter() - start
    stats = loader.stats()
    del loader
    fetches, fetched = log_figures(log)
    mode = ("cache, limit %.1f MB" % (limit / 1e6)) if limit else "cache" if cache_dir else "stream"
    return {"workers": workers, "mode": mode,
            "index_s": round(index_s, 3), "index_fetches": index_fetches,
            "index_bytes": index_bytes, "epoch_fetches": fetches - index_fetches,
            "epoch_bytes": fetched - index_bytes, "images_per_s": round(images / seconds, 1),
            "stall_share": round(stats["trainer_wait_s"] / stats["wall_s"], 3)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", default="/tmp/ringloader-bench/photos-10x40")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--per-shard", type=int, default=80)
    parser.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    args = parser.parse_args()
    subprocess.run([sys.executable, os.path.join(HERE, "make_photo_folder.py"), args.photos,
                    "--classes", "10", "--per-class", "40"], check=True)
    work = tempfile.mkdtemp(prefix="ringloader-cache-bench-")
    shards = os.path.join(work, "shards")
    os.makedirs(shards)
    subprocess.run([os.path.join(args.build, "ringloader-shard"), args.photos,
                    os.path.join(shards, "photos-%04d.tar"), "--max-count", str(args.per_shard),
                    "--shuffle", "--seed", "0"], check=True, stdout=subprocess.DEVNULL)
    log = os.path.join(work, "fetches.log")
    with open(os.path.join(work, "fetch.sh"), "w") as f:
        f.write(FETCH.format(latency=args.latency, log=log))
    count = len([n for n in os.listdir(shards) if n.endswith(".tar")])
    pattern = f"pipe:sh {work}/fetch.sh {shards}/photos-{{0000..{count - 1:04d}}}.tar"
    total = sum(os.path.getsize(os.path.join(shards, n)) for n in os.listdir(shards))
    print(f"{count} shards, {total / 1e6:.1f} MB, latency {args.latency} s, "
          f"{os.cpu_count()} cores", file=sys.stderr)
    results = []
    for workers in (2, 4):
        for mode in ("stream", "cache", "small"):
            cache_dir = os.path.join(work, f"cache-{workers}-{mode}") if mode != "stream" else None
            # "small": room for 3 of the 5 shards, so every epoch fetches
            # again, ahead of the workers (prefetch).
            limit = 3 * total // count if mode == "small" else None
            results.append(run(pattern, log, workers, args.epochs, cache_dir, limit, 1))
            r = results[-1]
            print(f"{workers} workers {r['mode']:20s}: index {r['index_fetches']} fetches "
                  f"{r['index_bytes'] / 1e6:.1f} MB in {r['index_s']:.2f} s; epochs "
                  f"{r['epoch_fetches']} fetches {r['epoch_bytes'] / 1e6:.1f} MB; "
                  f"{r['images_per_s']:.0f} img/s, stall {100 * r['stall_share']:.0f}%",
                  file=sys.stderr)
    load = open("/proc/loadavg").read().split()[:3]
    print(json.dumps({"shards": count, "shard_bytes": total, "epochs": args.epochs,
                      "latency_s": args.latency, "cores": os.cpu_count(),
                      "load_average": load, "results": results}, indent=1))


if __name__ == "__main__":
    main()
