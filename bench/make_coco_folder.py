#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Builds a tiny COCO-format detection dataset from real photographs.

The layout is the one torchvision's references/detection/coco_utils.py
reads (``get_coco``)::

    OUT/train2017/*.png  OUT/val2017/*.png
    OUT/annotations/instances_train2017.json
    OUT/annotations/instances_val2017.json

Images are crops of the photographs bench/make_photo_folder.py uses, at
sizes drawn in [min_side, max_side] so that every batch mixes shapes.
Each image carries 1..max_boxes boxes (COCO ``[x, y, w, h]``, a rectangle
polygon as its segmentation, a category among a few COCO ids).

--mirror makes every image and every box left-right symmetric (the left
half of the crop is mirrored onto the right; each box is centred on the
vertical midline, integer coordinates) and saves PNG, so a horizontal flip
gives back the same pixels and the same boxes exactly. A flip augmentation
(the references' default ``--data-augmentation hflip``) then changes
nothing, and a run with one loader can be compared line by line with a run
with another although the two draw their flips from different generators.

Deterministic (seeded).

  /usr/bin/python3 bench/make_coco_folder.py OUT [--train 16] [--val 4] [--mirror]
"""
import argparse
import json
import os
import random
import sys

from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_photo_folder import load_sources, make_one  # noqa: E402

CATEGORIES = [1, 2, 3, 17, 18, 62]  # person, bicycle, car, cat, dog, chair


def mirrored(image):
    """The left half (middle column included) and its mirror image."""
    width, height = image.size
    half = image.crop((0, 0, (width + 1) // 2, height))
    image = image.copy()
    image.paste(half.transpose(Image.FLIP_LEFT_RIGHT), (width // 2, 0))
    return image


def draw_box(rng, width, height, mirror):
    """An integer [x, y, w, h] box of at least 8 px a side inside the image."""
    box_h = rng.randint(8, max(8, height // 2))
    y = rng.randint(0, height - box_h)
    if mirror:
        half = rng.randint(4, max(4, width // 4))
        x = width // 2 - half
        # Symmetric about width / 2: x0 + x1 == width exactly.
        return [x, y, width - 2 * x, box_h]
    box_w = rng.randint(8, max(8, width // 2))
    return [rng.randint(0, width - box_w), y, box_w, box_h]


def write_split(out, split, count, rng, sources, args, first_id):
    folder = os.path.join(out, f"{split}2017")
    os.makedirs(folder, exist_ok=True)
    images, annotations = [], []
    for n in range(count):
        image_id = first_id + n
        size = (rng.randint(args.min_side, args.max_side),
                rng.randint(args.min_side, args.max_side))
        image = make_one(rng, sources[rng.randrange(len(sources))][1], size)
        if args.mirror:
            image = mirrored(image)
        name = f"{image_id:012d}.{'png' if args.mirror else 'jpg'}"
        image.save(os.path.join(folder, name))
        width, height = image.size
        images.append({"id": image_id, "file_name": name, "width": width, "height": height})
        for _ in range(rng.randint(1, args.max_boxes)):
            x, y, w, h = draw_box(rng, width, height, args.mirror)
            annotations.append({
                "id": len(annotations) + 1 + first_id * 100, "image_id": image_id,
                "category_id": rng.choice(CATEGORIES), "bbox": [x, y, w, h],
                "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]],
                "area": w * h, "iscrowd": 0})
    categories = [{"id": c, "name": f"category_{c}", "supercategory": "thing"}
                  for c in CATEGORIES]
    os.makedirs(os.path.join(out, "annotations"), exist_ok=True)
    with open(os.path.join(out, "annotations", f"instances_{split}2017.json"), "w") as f:
        json.dump({"images": images, "annotations": annotations,
                   "categories": categories}, f)
    return len(annotations)


def make(out, train=16, val=4, min_side=96, max_side=320, max_boxes=4, mirror=False,
         seed=0):
    """Writes the dataset; returns (images, boxes) written."""
    args = argparse.Namespace(min_side=min_side, max_side=max_side,
                              max_boxes=max_boxes, mirror=mirror)
    rng = random.Random(seed)
    sources = load_sources()
    boxes = write_split(out, "train", train, rng, sources, args, 1)
    boxes += write_split(out, "val", val, rng, sources, args, 1 + train)
    return train + val, boxes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--train", type=int, default=16)
    parser.add_argument("--val", type=int, default=4)
    parser.add_argument("--min-side", type=int, default=96)
    parser.add_argument("--max-side", type=int, default=320)
    parser.add_argument("--max-boxes", type=int, default=4)
    parser.add_argument("--mirror", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    images, boxes = make(args.out, args.train, args.val, args.min_side, args.max_side,
                         args.max_boxes, args.mirror, args.seed)
    print(f"{args.out}: {images} images, {boxes} boxes")


if __name__ == "__main__":
    main()
