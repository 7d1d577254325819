# SPDX-License-Identifier: BSD-3-Clause
"""Writes the peers' own formats from the photo folder, once (cached by a
stamp file next to each output):

- LitData: `litdata.optimize` chunks holding each photo's JPEG bytes
  unchanged and its label;
- Mosaic Streaming: MDS shards (`MDSWriter`) of the same: the JPEG bytes
  unchanged ('bytes' column) and the label ('int'), no compression (JPEG
  does not shrink) and its default 64 MiB shards, as its ImageNet converter
  writes them;
- FFCV exact-ish: a .beton with every photo at its own size, re-encoded by
  FFCV's writer as JPEG quality 95 (FFCV's writer always re-encodes
  'jpg' mode; 95 is the closest to the sources' 92-96);
- FFCV recipe: its ImageNet recipe's writer settings (max side 256,
  write_mode='proportion', compress_probability 0.5, JPEG quality 90), which
  shrinks photos and so changes the pixels the crop sees.

    python bench/peers/prepare.py FOLDER OUT_DIR [--only litdata,mosaic,ffcv]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402


def stamped(path, what):
    stamp = path.rstrip("/") + ".done"
    if os.path.exists(stamp):
        print(f"prepare: {what}: cached ({path})", file=sys.stderr)
        return True, stamp
    return False, stamp


def _litdata_sample(sample):
    # Module level: litdata's workers are spawned and unpickle it.
    with open(sample[0], "rb") as f:
        return {"jpeg": f.read(), "label": sample[1]}


def write_litdata(folder, out):
    import litdata as ld
    done, stamp = stamped(out, "litdata")
    if done:
        return
    samples = peers.folder_samples(folder)
    start = time.perf_counter()
    ld.optimize(fn=_litdata_sample, inputs=samples, output_dir=out, num_workers=2,
                chunk_bytes="64MB", mode="overwrite")
    open(stamp, "w").close()
    print(f"prepare: litdata written in {time.perf_counter() - start:.1f} s",
          file=sys.stderr)


def write_mosaic(folder, out):
    from streaming import MDSWriter
    done, stamp = stamped(out, "mosaic")
    if done:
        return
    start = time.perf_counter()
    columns = {"jpeg": "bytes", "label": "int"}
    with MDSWriter(out=out, columns=columns, compression=None, size_limit=1 << 26) as writer:
        for path, label in peers.folder_samples(folder):
            with open(path, "rb") as f:
                writer.write({"jpeg": f.read(), "label": label})
    open(stamp, "w").close()
    print(f"prepare: mosaic written in {time.perf_counter() - start:.1f} s", file=sys.stderr)


class _PilFolder:
    def __init__(self, folder):
        self.samples = peers.folder_samples(folder)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        import numpy as np
        from PIL import Image
        path, label = self.samples[index]
        return np.asarray(Image.open(path).convert("RGB")), label


def write_ffcv(folder, out, recipe):
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter
    what = "ffcv-recipe" if recipe else "ffcv"
    done, stamp = stamped(out, what)
    if done:
        return
    if recipe:
        image = RGBImageField(write_mode="proportion", max_resolution=256,
                              compress_probability=0.5, jpeg_quality=90)
    else:
        image = RGBImageField(write_mode="jpg", max_resolution=None, jpeg_quality=95)
    start = time.perf_counter()
    writer = DatasetWriter(out, {"image": image, "label": IntField()}, num_workers=2)
    writer.from_indexed_dataset(_PilFolder(folder))
    open(stamp, "w").close()
    print(f"prepare: {what} written in {time.perf_counter() - start:.1f} s, "
          f"{os.path.getsize(out) / 2**20:.0f} MiB", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("out")
    parser.add_argument("--only", default="litdata,mosaic,ffcv")
    args = parser.parse_args()
    only = args.only.split(",")
    os.makedirs(args.out, exist_ok=True)
    if "litdata" in only:
        write_litdata(args.folder, os.path.join(args.out, "litdata"))
    if "mosaic" in only:
        write_mosaic(args.folder, os.path.join(args.out, "mosaic"))
    if "ffcv" in only:
        write_ffcv(args.folder, os.path.join(args.out, "photos-q95.beton"), recipe=False)
        write_ffcv(args.folder, os.path.join(args.out, "photos-256-q90.beton"), recipe=True)


if __name__ == "__main__":
    main()
