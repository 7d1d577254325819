#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Remote shards start at once (issue 29, item 3): time to the first batch
over --shards tar shards behind a throttled `pipe:` command
(`perl bench/throttle.pl RATE file`: RATE bytes/s from the first byte, one
command per shard, as `pipe:curl ...` would be; `pv -L` lets the first
RATE/10 bytes through at once, so small shards would not be slowed),
for ringloader without a shard index (construction streams every shard,
index_in_background=False: one at a time, and --streams at once; or the
default, shards indexed in the background while the first epoch reads
them),
ringloader with the index `ringloader-shard --index-only` wrote, with a
plain wids index of the same shards (counts only, as `widsindex` writes;
workers find samples by streaming), and
WebDataset 1.0.2 (run by the interpreter of
/root/.cache/ringloader/venv-peers-py312, its torch; the row is skipped
with a message when that venv is absent).

Builds its own data under --data (kept for later runs): an ImageFolder of
symlinks to one 128x128 JPEG (~--image-kib KiB of noise), --per-shard
samples per shard, written by ringloader-shard. Workload for every side:
Resize((16, 16)) + ToTensor, batch --batch-size, --workers workers, no
shuffle (every side reads shards in order from the first), time from
constructing the dataset (imports done) to the first batch; --repeats runs each, the
median is printed.

    nice -n 19 python3 bench/shard_start.py                    # 1,000 x 170 KB at 50 MB/s
    nice -n 19 python3 bench/shard_start.py --per-shard 32 --data /tmp/rl-start-32
    nice -n 19 python3 bench/shard_start.py --epoch   # and the whole first epoch
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = "/root/.cache/ringloader/venv-peers-py312/bin/python"


def tool():
    for path in (os.path.join(ROOT, "build", "ringloader-shard"), shutil.which("ringloader-shard")):
        if path and os.access(path, os.X_OK):
            return path
    sys.exit("ringloader-shard is neither built (build/) nor on PATH")


def make_data(root, shards, per_shard, image_kib):
    """root/shards/train-%06d.tar (+ train.json); a marker says it is whole."""
    marker = os.path.join(root, f".complete-{shards}-{per_shard}-{image_kib}")
    out = os.path.join(root, "shards")
    if os.path.exists(marker):
        return out
    if os.path.exists(root):
        shutil.rmtree(root)
    import numpy as np
    from PIL import Image
    images = os.path.join(root, "images", "c0")
    os.makedirs(images)
    os.makedirs(out)
    side = 128
    rng = np.random.default_rng(0)
    quality = 95
    while True:  # noise compresses badly: pick the quality that gives ~image_kib
        pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(os.path.join(root, "one.jpg"), quality=quality)
        if os.path.getsize(os.path.join(root, "one.jpg")) <= image_kib * 1024 or quality < 20:
            break
        quality -= 5
    for n in range(shards * per_shard):
        os.symlink("../../one.jpg", os.path.join(images, f"{n:07d}.jpg"))
    subprocess.run([tool(), os.path.join(root, "images"), os.path.join(out, "train-%06d.tar"),
                    "--max-count", str(per_shard)], check=True, stdout=subprocess.DEVNULL)
    open(marker, "w").close()
    return out


# ---- one side, in its own interpreter ----

def run_side(side, urls, index, batch_size, workers, streams, background, epoch):
    # Imports are not timed: each side's interpreter and torch differ.
    if side == "webdataset":
        import torch
        import torchvision.transforms as T
        import webdataset as wds
        transform = T.Compose([T.Resize((16, 16)), T.ToTensor()])
        start = time.monotonic()
        dataset = (wds.WebDataset(urls, shardshuffle=False).decode("pil")
                   .to_tuple("jpg", "cls").map_tuple(transform, int).batched(batch_size))
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers)
    else:
        import ringloader
        from ringloader import transforms as T
        transform = T.Compose([T.Resize((16, 16)), T.ToTensor()])
        start = time.monotonic()
        dataset = ringloader.datasets.TarShards(urls, transform, index=index or None,
                                                index_streams=streams,
                                                index_in_background=background)
        loader = ringloader.DataLoader(dataset, batch_size=batch_size, num_workers=workers)
    built = time.monotonic() - start
    batches = iter(loader)
    images, _ = next(batches)
    first = time.monotonic() - start
    assert images.shape[0] == batch_size, images.shape
    out = {"construct_s": built, "first_batch_s": first}
    if epoch:
        out["samples"] = images.shape[0] + sum(images.shape[0] for images, _ in batches)
        out["epoch_s"] = time.monotonic() - start
    print(json.dumps(out), flush=True)


def measure(python, side, urls, index, streams, background, args):
    env = dict(os.environ)
    if side != "webdataset":
        env["PYTHONPATH"] = os.path.join(ROOT, "build", "python")
    command = [python, os.path.abspath(__file__), "--side", side, "--urls", urls,
               "--index", index or "", "--batch-size", str(args.batch_size),
               "--workers", str(args.workers), "--streams", str(streams),
               "--background", str(int(background))] + (["--epoch"] if args.epoch else [])
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def write_counts_index(full, path):
    """What WebDataset's widsindex writes: url, nsamples, filesize per shard."""
    with open(full) as f:
        manifest = json.load(f)
    with open(path, "w") as f:
        json.dump({"__kind__": manifest["__kind__"], "wids_version": 1,
                   "shardlist": [{k: e[k] for k in ("url", "nsamples", "filesize")}
                                 for e in manifest["shardlist"]]}, f)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="/tmp/ringloader-shard-start")
    parser.add_argument("--shards", type=int, default=1000)
    parser.add_argument("--per-shard", type=int, default=8)
    parser.add_argument("--image-kib", type=int, default=32)
    parser.add_argument("--rate", type=float, default=50e6, help="bytes/s per command")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--side")
    parser.add_argument("--urls")
    parser.add_argument("--index")
    parser.add_argument("--streams", type=int, default=8,
                        help="TarShards(index_streams=) of the no-index rows after the first")
    parser.add_argument("--peers-python", default=PEERS,
                        help="an interpreter with webdataset and torch (Default: the peers venv)")
    parser.add_argument("--epoch", action="store_true",
                        help="also time the whole first epoch (construction to its end)")
    parser.add_argument("--background", type=int, default=1,
                        help="(one side) TarShards(index_in_background=)")
    args = parser.parse_args()
    if args.side:
        return run_side(args.side, args.urls, args.index, args.batch_size, args.workers,
                        args.streams, bool(args.background), args.epoch)
    if not shutil.which("perl"):
        sys.exit("needs perl (bench/throttle.pl)")
    out = make_data(args.data, args.shards, args.per_shard, args.image_kib)
    last = args.shards - 1
    digits = f"{{000000..{last:06d}}}"
    urls = f"pipe:perl {HERE}/throttle.pl {args.rate:.0f} {out}/train-{digits}.tar"
    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".tar"))
    index = os.path.join(args.data, "pipe-index.json")
    start = time.monotonic()
    subprocess.run([tool(), "--index-only", index, urls], check=True, stdout=subprocess.DEVNULL)
    index_s = time.monotonic() - start
    print(f"{args.shards} shards x {args.per_shard} samples, {total / 2**20:.0f} MiB, "
          f"{args.rate / 1e6:g} MB/s per shard command; batch {args.batch_size}, {args.workers} workers")
    print(f"ringloader-shard --index-only (once): {index_s:.1f} s, "
          f"index {os.path.getsize(index) / 2**10:.0f} KiB")
    counts = write_counts_index(index, os.path.join(args.data, "pipe-wids.json"))
    me = sys.executable
    sides = [("ringloader, no index, indexed first, 1 stream", me, "ringloader", "", 1, False),
             (f"ringloader, no index, indexed first, {args.streams} streams", me, "ringloader",
              "", args.streams, False),
             (f"ringloader, no index, indexed while reading, {args.streams} streams", me,
              "ringloader", "", args.streams, True),
             ("ringloader, index", me, "ringloader", index, 1, True),
             ("ringloader, plain wids index (counts only)", me, "ringloader", counts, 1, True)]
    if os.access(args.peers_python, os.X_OK):
        sides.append(("WebDataset 1.0.2", args.peers_python, "webdataset", "", 1, True))
    else:
        print(f"WebDataset row skipped: {args.peers_python} is absent")
    print("| | construction | first batch |" + (" first epoch |" if args.epoch else "") +
          "\n|---|---|---|" + ("---|" if args.epoch else ""))
    for name, python, side, side_index, streams, background in sides:
        runs = [measure(python, side, urls, side_index, streams, background, args)
                for _ in range(args.repeats)]
        construct = statistics.median(r["construct_s"] for r in runs)
        first = statistics.median(r["first_batch_s"] for r in runs)
        epoch = (f" {statistics.median(r['epoch_s'] for r in runs):.2f} s "
                 f"({runs[0]['samples']} samples) |" if args.epoch else "")
        print(f"| {name} | {construct:.2f} s | {first:.2f} s |{epoch}", flush=True)


if __name__ == "__main__":
    main()
