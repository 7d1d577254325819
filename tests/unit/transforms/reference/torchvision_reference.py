# SPDX-License-Identifier: BSD-3-Clause
"""Reference outputs for the C++ transform tests, computed by PIL and
torchvision themselves (run with /usr/bin/python3, which has torch).

  torchvision_reference.py inputs DIR
      Writes encoded test images into DIR and DIR/inputs.json describing them.
  torchvision_reference.py hsv DIR
      Writes PIL's HSV->RGB and RGB->HSV conversions of the triples
      i * 16 + i % 16 (i < 2^20, read as 24-bit r|g|b or h|s|v) to
      DIR/rgb_from_hsv.bin and DIR/hsv_from_rgb.bin.
  torchvision_reference.py apply REQUEST.json
      REQUEST.json is a list of cases {"input", "mode", "steps", "output"}.
      Each case opens `input` with PIL, converts it to `mode`, runs `steps`
      (torchvision functionals or transforms) and writes the raw result
      (uint8 HWC for a PIL image, the tensor's own dtype and layout otherwise)
      to `output`; `output`.json holds its shape and dtype. A case whose PIL
      decode fails writes {"error": message} instead.

Kept in Python so the reference is torchvision's own code, not a re-derivation.
"""
import json
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image

RNG = np.random.default_rng(20240611)


def photo_like(h, w, channels=3):
    """Gradients plus noise: smooth areas and edges, like photos."""
    y, x = np.mgrid[0:h, 0:w]
    planes = [x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), ((x + 2 * y) * 5) % 256,
              ((x * y) // 3) % 256]
    base = np.stack(planes[:channels], axis=-1).astype(np.int32)
    noise = RNG.integers(-35, 35, size=base.shape)
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def write_png(path, pixels, color_type, bit_depth, width=None, extra_chunks=()):
    """A minimal PNG writer for what PIL cannot save (16-bit RGB(A), LA,
    4-bit gray). `pixels` holds packed rows when bit_depth < 8."""
    h, w = pixels.shape[0], width or pixels.shape[1]
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type,
                                               0, 0, 0)))
        for kind, data in extra_chunks:
            f.write(png_chunk(kind, data))
        f.write(png_chunk(b"IDAT", zlib.compress(raw)))
        f.write(png_chunk(b"IEND", b""))


def make_inputs(folder):
    os.makedirs(folder, exist_ok=True)
    described = []

    def save(name, image, **options):
        path = os.path.join(folder, name)
        image.save(path, **options)
        described.append({"file": path, "name": name})

    rgb = Image.fromarray(photo_like(45, 67), "RGB")
    save("rgb.png", rgb)
    save("gray.png", rgb.convert("L"))
    save("palette.png", rgb.quantize(colors=50))
    palette_trns = rgb.quantize(colors=16)
    save("palette_trns.png", palette_trns, transparency=3)
    save("rgba.png", Image.fromarray(photo_like(45, 67, 4), "RGBA"))
    save("la.png", rgb.convert("LA"))
    save("gray_1bit.png", rgb.convert("1"))
    save("gray16.png", Image.fromarray((photo_like(31, 29, 1)[..., 0].astype(np.uint16) *
                                        3), "I;16"))
    # 16-bit RGB / RGBA / gray+alpha, low bytes set so truncation shows.
    wide = photo_like(23, 41, 4).astype(">u2") * 257 + 91
    for name, channels, color_type in (("rgb16.png", 3, 2), ("rgba16.png", 4, 6),
                                       ("la16.png", 2, 4)):
        path = os.path.join(folder, name)
        write_png(path, np.ascontiguousarray(wide[..., :channels]), color_type, 16)
        described.append({"file": path, "name": name})
    path = os.path.join(folder, "gray4.png")
    packed = np.packbits(np.unpackbits(photo_like(16, 20, 1), axis=-1)
                         .reshape(16, 20, 8)[..., 4:].reshape(16, -1), axis=-1)
    write_png(path, packed, 0, 4, width=20)
    described.append({"file": path, "name": "gray4.png"})
    save("rgb.bmp", rgb)
    save("palette.bmp", rgb.quantize(colors=40))
    save("gray.bmp", rgb.convert("L"))
    save("rgba.bmp", Image.fromarray(photo_like(45, 67, 4), "RGBA"))
    save("palette.gif", rgb.quantize(colors=64))
    save("gray.gif", rgb.convert("L"))
    save("q90_420.jpg", rgb, quality=90)
    save("q75_444.jpg", rgb, quality=75, subsampling=0)
    save("q80_422.jpg", rgb, quality=80, subsampling=1)
    save("progressive.jpg", rgb, quality=85, progressive=True)
    save("gray.jpg", rgb.convert("L"), quality=90)
    save("cmyk.jpg", rgb.convert("CMYK"), quality=90)
    save("odd_420.jpg", Image.fromarray(photo_like(33, 17), "RGB"), quality=95)
    with open(os.path.join(folder, "q90_420.jpg"), "rb") as f:
        clean = f.read()
    # libjpeg warns "extraneous bytes before marker" and PIL still loads it.
    path = os.path.join(folder, "extraneous.jpg")
    with open(path, "wb") as f:
        f.write(clean[:-2] + b"\x00\x00\x00" + clean[-2:])
    described.append({"file": path, "name": "extraneous.jpg"})
    save("large.jpg", Image.fromarray(photo_like(375, 500), "RGB"), quality=90)
    save("portrait.png", Image.fromarray(photo_like(480, 361), "RGB"))
    save("tiny.png", Image.fromarray(photo_like(9, 17), "RGB"))
    with open(os.path.join(folder, "inputs.json"), "w") as f:
        json.dump(described, f, indent=1)


def hsv_tables(folder):
    os.makedirs(folder, exist_ok=True)
    i = np.arange(1 << 20, dtype=np.uint32)
    code = i * 16 + i % 16
    triples = np.stack([(code >> 16) & 255, (code >> 8) & 255, code & 255], -1)
    image = triples.astype(np.uint8).reshape(1024, 1024, 3)
    rgb = np.asarray(Image.fromarray(image, "HSV").convert("RGB"))
    hsv = np.asarray(Image.fromarray(image, "RGB").convert("HSV"))
    rgb.tofile(os.path.join(folder, "rgb_from_hsv.bin"))
    hsv.tofile(os.path.join(folder, "hsv_from_rgb.bin"))


def interpolation(name):
    import torchvision.transforms as T
    return T.InterpolationMode(name)


def build_transform(op):
    """A torchvision transform from ringloader's JSON op, with its names."""
    import torchvision.transforms as T
    params = dict(op)
    name = params.pop("op")
    if "interpolation" in params:
        params["interpolation"] = interpolation(params["interpolation"])
    for key in ("size", "padding"):
        if isinstance(params.get(key), list) and len(params[key]) == 1:
            params[key] = params[key][0]
    if isinstance(params.get("fill"), list):
        params["fill"] = params["fill"][0] if len(params["fill"]) == 1 else tuple(
            params["fill"])
    return getattr(T, name)(**params)


def fill_value(fill):
    """ringloader's fill list as torchvision takes it: a number or a tuple."""
    return fill[0] if len(fill) == 1 else tuple(fill)


def run_step(image, step):
    import torchvision.transforms.functional as F
    fn = step["fn"]
    if fn == "transform":
        return build_transform(step["op"])(image)
    if fn == "resized_crop":
        i, j, h, w = step["box"]
        return F.resized_crop(image, i, j, h, w, step["size"],
                              interpolation(step["interpolation"]))
    if fn == "crop":
        i, j, h, w = step["box"]
        return F.crop(image, i, j, h, w)
    if fn == "pad":
        fill = step["fill"]
        fill = fill[0] if len(fill) == 1 else tuple(fill)
        return F.pad(image, step["padding"], fill, step["padding_mode"])
    if fn == "hflip":
        return F.hflip(image)
    if fn == "vflip":
        return F.vflip(image)
    if fn in ("adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue"):
        return getattr(F, fn)(image, step["factor"])
    if fn == "gaussian_blur":
        return F.gaussian_blur(image, step["kernel_size"], step["sigma"])
    if fn == "affine":
        return F.affine(image, step["angle"], step["translate"], step["scale"], step["shear"],
                        interpolation(step["interpolation"]), fill_value(step["fill"]),
                        step.get("center"))
    if fn == "erase":
        import torch
        i, j, h, w = step["box"]
        value = torch.tensor(step["value"], dtype=image.dtype)[:, None, None]
        return F.erase(image, i, j, h, w, value)
    raise ValueError("unknown step " + fn)


def apply(request_path):
    import torch
    with open(request_path) as f:
        cases = json.load(f)
    for case in cases:
        try:
            image = Image.open(case["input"])
            image = image.convert(case["mode"])
        except Exception as error:  # PIL's verdict is the reference too
            with open(case["output"] + ".json", "w") as f:
                json.dump({"error": str(error)}, f)
            continue
        for step in case["steps"]:
            image = run_step(image, step)
        if isinstance(image, Image.Image):
            array = np.asarray(image).reshape(image.size[1], image.size[0], -1)
        else:
            array = image.contiguous().numpy()
        array = np.ascontiguousarray(array)
        with open(case["output"], "wb") as f:
            f.write(array.tobytes())
        with open(case["output"] + ".json", "w") as f:
            json.dump({"shape": list(array.shape), "dtype": str(array.dtype)}, f)


if __name__ == "__main__":
    if sys.argv[1] == "inputs":
        make_inputs(sys.argv[2])
    elif sys.argv[1] == "apply":
        apply(sys.argv[2])
    elif sys.argv[1] == "hsv":
        hsv_tables(sys.argv[2])
    else:
        sys.exit("usage: torchvision_reference.py inputs DIR | hsv DIR | apply REQUEST.json")
