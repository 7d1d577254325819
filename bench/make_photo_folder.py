#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Builds an ImageNet-like JPEG ImageFolder from real photographs.

The sources are the colour photographs that Debian's python3-skimage ships
(astronaut, coffee, chelsea, rocket, motorcycle, retina, Hubble, IHC). Every
output image is a random crop of a source (random position, size and aspect),
rescaled so that both sides lie in [min_side, max_side] (375..640 px by
default, the bulk of ImageNet's train set), randomly flipped, with a slight
brightness change so no two files are byte-identical, and saved as a JPEG
(quality 90, 4:2:0, like most camera and web JPEGs) with Pillow.

--preset imagenet follows ImageNet's train set instead: widths drawn around
400 px (sd 120, clipped to 200..800), heights from the common aspect ratios
(4:3 most often, also 3:2, 3:4 and 1:1), so the mean is about 400x350; and
sensor-like grain (Gaussian, luma and chroma) with a quality drawn in 92..96,
so that files weigh 100-120 KiB on average as ImageNet's do. Grain matters for
speed: entropy decoding grows with the bytes, not the pixels.

Deterministic (seeded) and cached: a folder that already holds a
`.params.json` with the same parameters is left alone.

  /usr/bin/python3 bench/make_photo_folder.py OUT [--classes 10] [--per-class 100]
"""
import argparse
import json
import os
import random
import shutil
import sys

import numpy

from PIL import Image, ImageEnhance

# RINGLOADER_PHOTO_SOURCES: a folder holding these files elsewhere (a GPU box).
SKIMAGE_DATA = os.environ.get("RINGLOADER_PHOTO_SOURCES",
                              "/usr/lib/python3/dist-packages/skimage/data")
SOURCES = [
    "astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg",
    "motorcycle_left.png", "motorcycle_right.png", "retina.jpg",
    "hubble_deep_field.jpg", "ihc.png",
]
VERSION = 4  # bump when the generation changes


def load_sources():
    images = []
    for name in SOURCES:
        path = os.path.join(SKIMAGE_DATA, name)
        if not os.path.exists(path):
            continue
        image = Image.open(path)
        image.load()
        images.append((name, image.convert("RGB")))
    if not images:
        sys.exit(f"no source photographs found in {SKIMAGE_DATA} "
                 "(apt-get install python3-skimage)")
    return images


def uniform_size(rng, min_side, max_side):
    return rng.randint(min_side, max_side), rng.randint(min_side, max_side)


def imagenet_size(rng, min_side, max_side):
    width = int(min(max_side, max(min_side, rng.gauss(400, 120))))
    aspect = rng.choice([4 / 3, 4 / 3, 4 / 3, 3 / 2, 3 / 4, 1.0])
    height = int(min(max_side, max(min_side, width / aspect)))
    return width, height


def add_grain(image, sigma, seed):
    """Sensor-like noise: mostly luma, some chroma, as camera photos carry."""
    noise = numpy.random.default_rng(seed)
    pixels = numpy.asarray(image).astype(numpy.float32)
    height, width = pixels.shape[:2]
    pixels += noise.normal(0, sigma, (height, width, 1))
    pixels += noise.normal(0, sigma / 2, (height, width, 3))
    return Image.fromarray(numpy.clip(pixels + 0.5, 0, 255).astype(numpy.uint8))


def make_one(rng, source, out_size):
    width, height = source.size
    out_w, out_h = out_size
    aspect = out_w / out_h
    # A crop of the source with that aspect, 50..100% of the largest one.
    max_crop_w = min(width, int(height * aspect))
    max_crop_h = int(max_crop_w / aspect)
    frac = rng.uniform(0.5, 1.0)
    crop_w = max(8, int(max_crop_w * frac))
    crop_h = max(8, int(max_crop_h * frac))
    x0 = rng.randint(0, width - crop_w)
    y0 = rng.randint(0, height - crop_h)
    image = source.crop((x0, y0, x0 + crop_w, y0 + crop_h))
    image = image.resize((out_w, out_h), Image.BICUBIC)
    if rng.random() < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    image = ImageEnhance.Brightness(image).enhance(rng.uniform(0.85, 1.15))
    return image


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--per-class", type=int, default=100)
    parser.add_argument("--preset", choices=["uniform", "imagenet"], default="uniform")
    parser.add_argument("--min-side", type=int)
    parser.add_argument("--max-side", type=int)
    parser.add_argument("--quality", type=int, default=90,
                        help="uniform preset only; imagenet draws 92..96")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    imagenet = args.preset == "imagenet"
    if args.min_side is None:
        args.min_side = 200 if imagenet else 375
    if args.max_side is None:
        args.max_side = 800 if imagenet else 640

    params = {"version": VERSION, "classes": args.classes,
              "per_class": args.per_class, "min_side": args.min_side,
              "max_side": args.max_side, "quality": args.quality,
              "seed": args.seed, "preset": args.preset}
    stamp = os.path.join(args.out, ".params.json")
    if os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == params:
                print(f"{args.out}: cached ({args.classes} x {args.per_class})")
                return
        shutil.rmtree(args.out)

    sources = load_sources()
    rng = random.Random(args.seed)
    total_bytes = total_w = total_h = 0
    pick_size = imagenet_size if imagenet else uniform_size
    os.makedirs(args.out, exist_ok=True)
    for c in range(args.classes):
        class_dir = os.path.join(args.out, f"class_{c:03d}")
        os.makedirs(class_dir, exist_ok=True)
        # Each class leans on one photograph but mixes in the others.
        home = c % len(sources)
        for i in range(args.per_class):
            index = home if rng.random() < 0.6 else rng.randrange(len(sources))
            size = pick_size(rng, args.min_side, args.max_side)
            image = make_one(rng, sources[index][1], size)
            quality = args.quality
            if imagenet:
                image = add_grain(image, rng.uniform(16, 22), rng.getrandbits(32))
                quality = rng.randint(92, 96)
            path = os.path.join(class_dir, f"img_{i:05d}.jpg")
            image.save(path, "JPEG", quality=quality)
            total_bytes += os.path.getsize(path)
            total_w += size[0]
            total_h += size[1]
    with open(stamp, "w") as f:
        json.dump(params, f)
    n = args.classes * args.per_class
    print(f"{args.out}: wrote {n} JPEGs, {total_bytes / n / 1024:.0f} KiB and "
          f"{total_w / n:.0f}x{total_h / n:.0f} px on average")


if __name__ == "__main__":
    main()
