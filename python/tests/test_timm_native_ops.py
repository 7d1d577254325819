# SPDX-License-Identifier: BSD-3-Clause
"""The native ops timm's transforms convert to, without timm (any torch):
TimmRandAugment's checks and its 0-bit posterize, RandomResizedCrop's
interpolation='random', RandomErasing's value='random_per_channel'. Their
parity with timm's own code is test_timm_transforms.py (needs timm)."""
import json

import numpy as np
import PIL
import pytest
from PIL import Image, ImageOps

import ringloader.transforms as rt
from ringloader import _ringloader

from test_autoaugment import photo, png

INCREASING = ("AutoContrast,Equalize,Invert,Rotate,PosterizeIncreasing,SolarizeIncreasing,"
              "SolarizeAdd,ColorIncreasing,ContrastIncreasing,BrightnessIncreasing,"
              "SharpnessIncreasing,ShearX,ShearY,TranslateXRel,TranslateYRel").split(",")


def draws(op, count, seed=0):
    return json.loads(_ringloader.augment_draws(json.dumps(op.to_op()), 40, 50, seed, 0, 0,
                                                count))


def test_posterize_to_zero_bits_is_what_pillow_before_13_gives():
    """timm's PosterizeIncreasing at magnitude 10 keeps 0 bits: Pillow <= 12
    gives a black image (its mask ~(2**8 - 1)); Pillow 13 raises ValueError.
    The native op gives Pillow 12's black image."""
    op = rt.TimmRandAugment(["PosterizeIncreasing"], num_layers=1, prob=1.0, magnitude=10)
    assert [s[2] for s in draws(op, 1)[0]] == [0]
    image = photo(20, 30)
    out = rt.apply(rt.Compose([op]), png(image), index=0).numpy()
    assert out.max() == 0
    if tuple(int(v) for v in PIL.__version__.split(".")[:2]) < (13, 0):
        assert np.asarray(ImageOps.posterize(image, 0)).max() == 0
    else:
        with pytest.raises(ValueError):
            ImageOps.posterize(image, 0)


def test_magnitude_noise_is_clamped_and_spread():
    op = rt.TimmRandAugment(INCREASING, num_layers=2, prob=1.0, magnitude=9, magnitude_std=0.5)
    magnitudes = [s[1] for d in draws(op, 2000) for s in d]
    assert min(magnitudes) >= 0 and max(magnitudes) == 10.0  # clamped at _LEVEL_DENOM
    assert abs(np.mean(magnitudes) - 9.0) < 0.05
    assert 0.35 < np.std(magnitudes) < 0.5  # 0.5 less what the clamp cuts off
    uniform = rt.TimmRandAugment(INCREASING, magnitude=9, magnitude_std=float("inf"))
    spread = [s[1] for d in draws(uniform, 2000) for s in d]
    assert 0 <= min(spread) < 0.2 and 8.8 < max(spread) <= 9 and abs(np.mean(spread) - 4.5) < 0.3


def test_unknown_op_is_refused_by_name():
    with pytest.raises(_ringloader.OptionError, match="GaussianBlurRand"):
        rt.TimmRandAugment(["Rotate", "GaussianBlurRand"])
    bad = rt.TimmRandAugment(["Rotate"])
    bad.ops = ["Rotate", "Cutout"]
    with pytest.raises(_ringloader.OptionError, match="Cutout"):
        rt.apply(rt.Compose([bad]), png(photo(8, 8)))


def test_random_interpolation_draws_both_filters():
    image = photo(30, 40)
    crop = rt.RandomResizedCrop(16, scale=(1, 1), ratio=(4 / 3, 4 / 3), interpolation="random")
    refs = [np.asarray(image.resize((16, 16), mode)).astype(np.int32)
            for mode in (Image.Resampling.BILINEAR, Image.Resampling.BICUBIC)]
    picks = []
    for index in range(100):
        ours = rt.apply(rt.Compose([crop]), png(image), index=index).numpy().astype(np.int32)
        ours = ours.reshape(refs[0].shape)
        picks.append([i for i, ref in enumerate(refs) if np.abs(ours - ref).max() <= 1])
    assert all(len(p) == 1 for p in picks)
    assert 25 < sum(p[0] for p in picks) < 75


def test_random_per_channel_erasing_fills_one_value_per_channel():
    pipeline = rt.Compose([rt.ToTensor(), rt.RandomErasing(1.0, value="random_per_channel")])
    clean = rt.apply(rt.Compose([rt.ToTensor()]), png(photo(24, 32))).numpy()
    values = []
    for index in range(50):
        out = rt.apply(pipeline, png(photo(24, 32)), index=index).numpy()
        mask = (out != clean).any(axis=0)
        for channel in out[:, mask]:
            assert len(set(channel.tolist())) == 1  # one value over the box
        values.append(out[:, mask][:, 0])
    values = np.array(values)
    assert abs(values.mean()) < 0.3 and 0.7 < values.std() < 1.3  # standard normals


@pytest.mark.parametrize("longest,expected", [(0.0, (20, 33)), (1.0, (14, 24)),
                                              (0.5, (17, 28))])
def test_resize_keep_ratio_sizes_and_pixels(longest, expected):
    """ratio = max(30/20, 50/24) * longest + min(...) * (1 - longest); each
    side round(side / ratio), resized with PIL's filter."""
    image = photo(30, 50)
    op = rt.ResizeKeepRatio((20, 24), longest=longest, interpolation="bicubic")
    out = rt.apply(rt.Compose([op, rt.PILToTensor()]), png(image)).numpy().astype(np.int32)
    assert out.shape == (3, *expected)
    ref = np.asarray(image.resize(expected[::-1], Image.Resampling.BICUBIC)).astype(np.int32)
    assert np.abs(out.transpose(1, 2, 0) - ref).max() <= 1
