# SPDX-License-Identifier: BSD-3-Clause
"""Pixel agreement with torchvision on the same crop boxes (PSNR, uint8 RGB,
no flip): for each of `--limit` photos a RandomResizedCrop box is drawn once
(seeded, torchvision's rule), and each peer whose API takes a box crops it
and resizes it to 224 x 224; torchvision's `F.resized_crop` (bilinear,
antialias, PIL) is the reference.

    python bench/peers/psnr.py FOLDER --peer torchvision|dali|spdl --out X.npy
    python bench/peers/psnr.py FOLDER --compare REF.npy X.npy ...

Peers whose API draws its own box (FFCV's RandomResizedCrop decoder,
ringloader's Python API) are not here: ringloader's exact mode is checked
pixel-equal to torchvision by its parity tests, and its fast mode against
exact by ringloader-fast-psnr (docs/transforms.md).
"""
import argparse
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402


def boxes(folder, limit):
    from PIL import Image
    rng = random.Random(1)
    samples = peers.folder_samples(folder)
    samples = rng.sample(samples, min(limit, len(samples)))
    out = []
    for path, _ in samples:
        with Image.open(path) as image:
            width, height = image.size
        out.append((path, peers.crop_box(width, height, rng)))
    return out


def torchvision_crops(items):
    import torchvision.transforms.functional as F
    from PIL import Image
    result = []
    for path, (top, left, h, w) in items:
        image = Image.open(path).convert("RGB")
        crop = F.resized_crop(image, top, left, h, w, [224, 224],
                              F.InterpolationMode.BILINEAR, antialias=True)
        result.append(np.asarray(crop))
    return np.stack(result)


def spdl_crops(items):
    import spdl.io
    result = []
    for path, (top, left, h, w) in items:
        packets = spdl.io.demux_image(path)
        desc = f"crop={w}:{h}:{left}:{top},scale=224:224:flags=bilinear,format=pix_fmts=rgb24"
        frames = spdl.io.decode_packets(packets, filter_desc=desc)
        result.append(spdl.io.to_numpy(spdl.io.convert_frames(frames)).reshape(224, 224, 3))
    return np.stack(result)


def dali_crops(items):
    from nvidia.dali import fn, pipeline_def, types
    data = [(np.fromfile(path, dtype=np.uint8),
             np.array([top, left], dtype=np.float32), np.array([h, w], dtype=np.float32))
            for path, (top, left, h, w) in items]

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        jpeg, anchor, shape = fn.external_source(
            source=lambda info: data[info.idx_in_epoch % len(data)], num_outputs=3, batch=False)
        image = fn.decoders.image_slice(jpeg, anchor, shape, axis_names="HW",
                                        normalized_anchor=False, normalized_shape=False,
                                        device="cpu", output_type=types.RGB)
        return fn.resize(image, resize_x=224, resize_y=224,
                         interp_type=types.INTERP_LINEAR, antialias=True)

    pipeline = pipe()
    pipeline.build()
    return np.stack([pipeline.run()[0].as_array()[0] for _ in data])


def psnr(reference, other):
    diff = reference.astype(np.float64) - other.astype(np.float64)
    mse = (diff ** 2).reshape(len(diff), -1).mean(axis=1)
    with np.errstate(divide="ignore"):
        return 10 * np.log10(255.0 ** 2 / mse), np.abs(diff).max()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--peer", choices=["torchvision", "spdl", "dali"])
    parser.add_argument("--out")
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--compare", nargs="+")
    args = parser.parse_args()
    if args.compare:
        reference = np.load(args.compare[0])
        print("| peer | PSNR mean dB | 5th percentile | worst | max abs diff | images |")
        print("|---|---|---|---|---|---|")
        for path in args.compare[1:]:
            values, worst_diff = psnr(reference, np.load(path))
            finite = values[np.isfinite(values)]
            name = os.path.basename(path).removesuffix(".npy")
            if len(finite) == 0:
                print(f"| {name} | identical | | | 0 | {len(values)} |")
                continue
            print(f"| {name} | {finite.mean():.2f} | {np.percentile(finite, 5):.2f} | "
                  f"{finite.min():.2f} | {worst_diff:.0f} | {len(values)} "
                  f"({len(values) - len(finite)} identical) |")
        return
    items = boxes(args.folder, args.limit)
    crops = {"torchvision": torchvision_crops, "spdl": spdl_crops,
             "dali": dali_crops}[args.peer](items)
    np.save(args.out, crops)


if __name__ == "__main__":
    main()
