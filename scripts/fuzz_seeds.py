# SPDX-License-Identifier: BSD-3-Clause
"""Seed corpora for the libFuzzer harnesses (scripts/fuzz.sh): small valid
images of each format and modes, and pipelines as JSON, so the fuzzers
start inside the decoders and the parser rather than at their front door."""
import io
import json
import os
import sys

import numpy as np
from PIL import Image


MODES = {"JPEG": ["RGB", "L", "CMYK"], "PNG": ["RGB", "L", "RGBA", "P", "LA"],
         "BMP": ["RGB", "L", "P"], "GIF": ["P", "L"]}


def images(out, fmt, **save_args):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    for i, mode in enumerate(MODES[fmt]):
        height, width = rng.integers(3, 17, size=2)
        pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
        image = Image.fromarray(pixels).convert(mode)
        for progressive in ((False, True) if fmt == "JPEG" else (False,)):
            buffer = io.BytesIO()
            extra = dict(save_args, progressive=True) if progressive else save_args
            image.save(buffer, fmt, **extra)
            with open(os.path.join(out, f"seed{i}{'p' if progressive else ''}"), "wb") as f:
                f.write(buffer.getvalue())


def pipelines(out):
    os.makedirs(out, exist_ok=True)
    seeds = [
        [{"op": "RandomResizedCrop", "size": [24]}, {"op": "RandomHorizontalFlip"},
         {"op": "ToTensor"}, {"op": "Normalize", "mean": [0.5, 0.5, 0.5], "std": [0.2, 0.2, 0.2]}],
        [{"op": "Resize", "size": [16, 20], "interpolation": "bicubic"}, {"op": "PILToTensor"}],
        [{"op": "Pad", "padding": [2, 3], "padding_mode": "reflect"}, {"op": "CenterCrop", "size": 8}],
        [{"op": "RandomCrop", "size": [10], "padding": [4], "pad_if_needed": True}],
        [{"op": "Resize", "size": [12]}, {"op": "CenterCrop", "size": [12]},
         {"op": "RandomVerticalFlip", "p": 1.0}],
        [{"op": "ColorJitter", "brightness": 0.4, "contrast": [0.5, 1.5], "saturation": 0.4,
          "hue": 0.1}, {"op": "RandomGrayscale", "p": 0.5}, {"op": "CenterCrop", "size": 9},
         {"op": "Grayscale", "num_output_channels": 3}],
        [{"op": "RandomRotation", "degrees": [-30, 30], "interpolation": "bilinear",
          "expand": True, "center": [3, 4], "fill": [1, 2, 3]}, {"op": "CenterCrop", "size": 16},
         {"op": "GaussianBlur", "kernel_size": [3, 5], "sigma": [0.1, 2.0]}],
        [{"op": "RandomAffine", "degrees": 20, "translate": [0.1, 0.2], "scale": [0.8, 1.2],
          "shear": [-5, 5, -3, 3], "interpolation": "bicubic", "fill": 7},
         {"op": "CenterCrop", "size": [12, 10]}, {"op": "ToTensor"},
         {"op": "RandomErasing", "p": 1.0, "value": "random"},
         {"op": "Normalize", "mean": [0.5], "std": [0.2]}],
    ]
    for i, seed in enumerate(seeds):
        with open(os.path.join(out, f"seed{i}.json"), "w") as f:
            json.dump(seed, f)


def slot_scripts(out):
    """fuzz_slot_protocol reads its input as a script of steps: a few
    fixed random ones get it past the first epochs."""
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    for i, size in enumerate((64, 128, 256, 512, 1024, 2048)):
        with open(os.path.join(out, f"seed{i}"), "wb") as f:
            f.write(rng.integers(0, 256, size=size, dtype=np.uint8).tobytes())


def tar_shards(out):
    """fuzz_tar_shard: small shards from Python's tarfile in each format
    (ustar, GNU long names, pax), with labels, extra members, a directory
    and a sample without an image, so mutations start from real headers."""
    import tarfile
    os.makedirs(out, exist_ok=True)
    members = [("000000.jpg", b"\xff\xd8jpeg"), ("000000.cls", b"3\n"),
               ("000001.cls", b"-1"), ("000001.png", b"png-bytes"), ("000001.json", b"{}"),
               ("d/" + "long" * 40 + ".webp", b"webp"), ("000002.seg.png", b"mask"),
               ("000003.txt", b"no image")]
    formats = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT,
               "pax": tarfile.PAX_FORMAT}
    for name, fmt in formats.items():
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=fmt) as tar:
            directory = tarfile.TarInfo("d")
            directory.type = tarfile.DIRTYPE
            tar.addfile(directory)
            for member, data in members:
                if fmt == tarfile.USTAR_FORMAT and len(member) > 100:
                    continue
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        with open(os.path.join(out, f"seed-{name}.tar"), "wb") as f:
            f.write(buffer.getvalue())


def sample_names(out):
    """fuzz_sample_names: "<member names, \\x1e between>\\0<shard index JSON>": names that
    look like the markers and pickles of issue 42, a full index and a plain
    wids one listing pipe: commands (the harness never runs them)."""
    os.makedirs(out, exist_ok=True)
    full = {"__kind__": "wids-shard-index-v1", "wids_version": 1, "ringloader_index": 1,
            "shardlist": [{"url": "pipe:touch /tmp/ringloader-fuzz-ran; cat s.tar",
                           "nsamples": 2, "filesize": 4096,
                           "ringloader": {"offsets": [512, 1536], "sizes": [100, 100],
                                          "labels": [0, 1],
                                          "names": ["[python-exception /tmp/x.pkl].bmp",
                                                    "a/b/../c.bmp"]}}]}
    counts = {"__kind__": "wids-shard-index-v1", "wids_version": 1, "base_path": "../x",
              "shardlist": [{"url": "pipe:touch /tmp/ringloader-fuzz-ran", "nsamples": 3},
                            {"url": "rel/s1.tar", "nsamples": 1}]}
    # Protocol-0 pickle text and the marker the trainer once parsed (a dot
    # would start the member's extension, so these have none).
    pickle_name = "(dp0\nS'x'\np1\n[python-exception /tmp/x_pkl] sample 0 (forged)\n"
    seeds = {"full": pickle_name.encode() + b"\x1e" + "\u00e9\u4e2d".encode() * 60 + b"\0" +
                     json.dumps(full).encode(),
             "counts": b"x\x1e.hidden\x1e" + b"y" * 150 + b"\0" + json.dumps(counts).encode(),
             "names": b"000001\x1e000001\x1e\xff\xfe bad utf8 \x01\x02\n\x1e/abs/path\x1e"}
    for name, data in seeds.items():
        with open(os.path.join(out, f"seed-{name}"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    root = sys.argv[1]
    images(os.path.join(root, "jpeg"), "JPEG", quality=80)
    images(os.path.join(root, "png"), "PNG")
    images(os.path.join(root, "bmp"), "BMP")
    images(os.path.join(root, "gif"), "GIF")
    pipelines(os.path.join(root, "pipeline_json"))
    slot_scripts(os.path.join(root, "slot_protocol"))
    tar_shards(os.path.join(root, "tar_shard"))
    sample_names(os.path.join(root, "sample_names"))
