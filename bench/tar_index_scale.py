#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The tar shard index at ImageNet scale (issue 29, "One index, shared"):
what ringloader.datasets.TarShards costs to build from a shard index and
what each process holds for it.

Builds its own data under --data: --shards tar files (1,000) listing
--samples samples in all (1,281,167) in a shard index (docs/tar_shards.md,
"Shard index"). Only the first --real samples of shard 0 and --real-rest of
every other shard are real members (8x8 PNG + .cls); the index points the
others at 1 KiB steps of a sparse tail, so 1.28M samples cost a few MB of
disk. The loader reads samples in order and never reaches them.

Measured, in this interpreter (run it once per build to compare):
  index   seconds of TarShards(pattern, index=...), and the trainer's
          private memory (Private_Clean + Private_Dirty of smaps_rollup)
          it added;
  workers each worker's private memory and PSS after --batches batches
          (batch 256, Resize((16, 16)) + ToTensor, --workers workers);
  trainer the trainer's private memory added by dataset + loader then,
          and its PSS; the tar sample table's size (shared memory).

    PYTHONPATH=build/python nice -n 19 /usr/bin/python3 bench/tar_index_scale.py
    ... bench/tar_index_scale.py --samples 200000 --data /tmp/ringloader-tar-200k
"""
import argparse
import io
import json
import os
import tarfile
import time


def write_dataset(root, shards, samples, real_first, real_rest):
    """root/s-NNNN.tar and root/index.json; a marker says it is whole."""
    marker = os.path.join(root, f".complete-{shards}-{samples}-{real_first}-{real_rest}")
    pattern = os.path.join(root, f"s-{{0000..{shards - 1:04d}}}.tar")
    index = os.path.join(root, "index.json")
    if os.path.exists(marker):
        return pattern, index
    import numpy as np
    from PIL import Image
    os.makedirs(root, exist_ok=True)
    png = io.BytesIO()
    Image.fromarray((np.arange(8 * 8 * 3) % 251).astype(np.uint8).reshape(8, 8, 3)).save(
        png, format="PNG")
    png = png.getvalue()
    start, shardlist, first = time.monotonic(), [], 0
    for shard in range(shards):
        count = samples // shards + (1 if shard < samples % shards else 0)
        real = min(count, real_first if shard == 0 else real_rest)
        path = os.path.join(root, f"s-{shard:04d}.tar")
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for n in range(first, first + real):
                for name, data in ((f"{n:08d}.png", png), (f"{n:08d}.cls", b"%d" % (n % 1000))):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        with tarfile.open(path) as tar:
            members = [m for m in tar.getmembers() if m.name.endswith(".png")]
        offsets = [m.offset_data for m in members]
        tail = os.path.getsize(path) + 512
        offsets += [tail + 1024 * k for k in range(count - real)]
        size = offsets[-1] + 1024 if count > real else os.path.getsize(path)
        os.truncate(path, size)
        shardlist.append({
            "url": os.path.basename(path), "nsamples": count, "filesize": size,
            "ringloader": {"offsets": offsets,
                           "sizes": [len(png)] * real + [100] * (count - real),
                           "labels": [n % 1000 for n in range(first, first + count)],
                           "names": [f"{n:08d}.png" for n in range(first, first + count)]}})
        first += count
    with open(index, "w") as f:
        json.dump({"__kind__": "wids-shard-index-v1", "wids_version": 1,
                   "ringloader_index": 1, "shardlist": shardlist}, f)
    open(marker, "w").close()
    print(f"made {samples:,} samples in {shards} shards in {time.monotonic() - start:.1f} s",
          flush=True)
    return pattern, index


def memory_kib(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    kib = {key: int(fields[key].split()[0]) for key in ("Pss", "Private_Clean", "Private_Dirty")}
    return {"private": kib["Private_Clean"] + kib["Private_Dirty"], "pss": kib["Pss"]}


def workers_of(pid):
    out = []
    for child in os.listdir("/proc"):
        if not child.isdigit():
            continue
        try:
            with open(f"/proc/{child}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == pid and "ringloader-worker" in os.readlink(f"/proc/{child}/exe"):
                out.append(int(child))
        except OSError:
            continue
    return sorted(out)


def measure(pattern, index, workers, batches):
    import torch  # noqa: F401 (its own memory is the baseline, not the index's)
    import ringloader
    from ringloader import transforms as T
    me = os.getpid()
    before = memory_kib(me)
    start = time.monotonic()
    dataset = ringloader.datasets.TarShards(pattern, T.Compose([T.Resize((16, 16)), T.ToTensor()]),
                                            index=index)
    seconds = time.monotonic() - start
    built = memory_kib(me)
    loader = ringloader.DataLoader(dataset, batch_size=256, num_workers=workers)
    it = iter(loader)
    for _ in range(batches):
        next(it)
    running = memory_kib(me)
    result = {"samples": len(dataset), "index_s": round(seconds, 2),
              "trainer_index_mib": round((built["private"] - before["private"]) / 1024, 1),
              "trainer_running_mib": round((running["private"] - before["private"]) / 1024, 1),
              "trainer_pss_mib": round(running["pss"] / 1024, 1),
              "table_mib": (round(dataset._tar.table_bytes / 2**20, 1)
                            if hasattr(dataset, "_tar") else None),
              "workers": [{key: round(value / 1024, 1) for key, value in memory_kib(pid).items()}
                          for pid in workers_of(me)]}
    del it, loader
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1_281_167)
    parser.add_argument("--shards", type=int, default=1000)
    parser.add_argument("--real", type=int, default=4096, help="real samples in shard 0")
    parser.add_argument("--real-rest", type=int, default=4, help="in each other shard")
    parser.add_argument("--data", default="/tmp/ringloader-tar-index-scale")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--make-only", action="store_true")
    args = parser.parse_args()
    pattern, index = write_dataset(args.data, args.shards, args.samples, args.real,
                                   args.real_rest)
    if not args.make_only:
        print(json.dumps(measure(pattern, index, args.workers, args.batches)), flush=True)


if __name__ == "__main__":
    main()
