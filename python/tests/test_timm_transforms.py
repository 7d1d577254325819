# SPDX-License-Identifier: BSD-3-Clause
"""timm's transforms (timm.data.create_transform) as native ops, against
timm's own code: pixels for the same draws (within one level, PIL ops) and
the draws' distributions over many samples (chi-square, as
test_autoaugment.py). Needs timm (the torch 2.x clients venv)."""
import json
import random
import re

import numpy as np
import pytest
import torch

import ringloader.transforms as rt
from ringloader import _ringloader

timm_data = pytest.importorskip("timm.data")
from PIL import Image  # noqa: E402
from timm.data import auto_augment as taa  # noqa: E402
from torchvision.transforms import functional as F  # noqa: E402

from test_autoaugment import P_MIN, biased, chi_square_p, photo, png  # noqa: E402

PIL_FILTERS = {"nearest": Image.Resampling.NEAREST, "bilinear": Image.Resampling.BILINEAR,
               "bicubic": Image.Resampling.BICUBIC}
MEAN = (0.485, 0.456, 0.406)
HPARAMS = dict(translate_const=int(224 * 0.45),
               img_mean=tuple(min(255, round(255 * x)) for x in MEAN))


def rand_augment(config, interpolation=None):
    hparams = dict(HPARAMS)
    if interpolation:
        hparams["interpolation"] = PIL_FILTERS[interpolation]
    return taa.rand_augment_transform(config, hparams)


def native_op(transform):
    (op,) = rt.Compose([transform]).transforms
    return op


def native_draws(transform, count, seed=0):
    text = _ringloader.augment_draws(json.dumps(native_op(transform).to_op()),
                                     40, 50, seed, 0, 0, count)
    return json.loads(text)


def timm_step(image, name, arg, filter_name, fill):
    """timm's op function for one drawn step (NAME_TO_OP with its kwargs).
    Posterize to 0 bits: Pillow 13 refuses it; Pillow <= 12 (what timm's
    code ran on until 2026) gives a black image, which the native op keeps."""
    fn = taa.NAME_TO_OP[name]
    if taa.LEVEL_TO_ARG[name] is None:
        return fn(image)
    if name.startswith("Posterize") and int(arg) == 0:
        return Image.new(image.mode, image.size)
    if name.startswith(("Posterize", "Solarize")):
        arg = int(arg)
    return fn(image, arg, fillcolor=fill, resample=PIL_FILTERS[filter_name])


def check_pixels(transform, samples, hw=(37, 53)):
    image = photo(*hw)
    data = png(image)
    fill = native_op(transform).fill
    seen = set()
    text = _ringloader.augment_draws(json.dumps(native_op(transform).to_op()),
                                     hw[0], hw[1], 0, 0, 0, samples)
    for index, steps in enumerate(json.loads(text)):
        ours = rt.apply(rt.Compose([transform]), data, index=index).numpy().astype(np.int32)
        theirs = image
        for name, _, arg, filter_name in steps:
            theirs = timm_step(theirs, name, arg, filter_name, tuple(fill))
            seen.add(name)
        theirs = np.asarray(theirs).astype(np.int32).reshape(ours.shape)
        assert np.abs(ours - theirs).max() <= 1, (index, steps)
    return seen


@pytest.mark.parametrize("config,interpolation", [
    ("rand-m9-n2-inc1", None), ("rand-m9-mstd0.5-inc1", None), ("rand-m9-n2", "bilinear"),
    ("rand-m7-n3-mstd101-inc1", "bicubic"), ("rand-m10-n1-p1.0-mmax12-inc1", "nearest")])
def test_rand_augment_pixels_match_timm(config, interpolation):
    transform = rand_augment(config, interpolation)
    seen = check_pixels(transform, 120)
    assert len(seen) >= len(transform.ops) - 2, seen


def test_posterize_to_zero_bits_is_black():
    """mstd draws magnitude 10, where PosterizeIncreasing keeps 0 bits."""
    transform = rand_augment("rand-m10-n1-p1.0-inc1")
    transform.ops = [op for op in transform.ops if op.name == "PosterizeIncreasing"]
    (steps,) = native_draws(transform, 1)
    assert steps[0][2] == 0
    out = rt.apply(rt.Compose([transform]), png(photo(20, 30)), index=0)
    assert int(out.max()) == 0


# --- draws: the same distributions as timm's ---------------------------------

def timm_draws(transform, count, seed=0):
    """What timm's RandAugment hands its op functions, per sample:
    (name, argument, filter) per applied op."""
    recorded = []

    def recorder(name):
        def record(img, *args, **kwargs):
            filter_name = ""
            if name in GEOMETRIC:  # their _check_args_tf draws the filter
                mode = taa._interpolation(dict(kwargs))
                filter_name = {v: k for k, v in PIL_FILTERS.items()}[mode]
            recorded[-1].append((name, args[0] if args else 0.0, filter_name))
            return img
        return record

    for op in transform.ops:
        op.aug_fn = recorder(op.name)
    random.seed(seed)
    np.random.seed(seed)
    image = Image.new("RGB", (50, 40))
    out = []
    for _ in range(count):
        recorded.append([])
        transform(image)
        out.append(recorded[-1])
    return out


GEOMETRIC = {"Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY", "TranslateXRel",
             "TranslateYRel"}


def keyed(ours, theirs):
    """Each step as (op, filter, argument bin): bins are the pooled deciles
    of that op's arguments (ints and signs kept apart)."""
    values = {}
    for name, arg, _ in ours + theirs:
        values.setdefault(name, []).append(float(arg))
    edges = {name: np.unique(np.quantile(v, np.linspace(0, 1, 11)[1:-1]))
             for name, v in values.items()}

    def key(step):
        name, arg, filter_name = step
        return (name, filter_name, int(np.digitize(float(arg), edges[name])))
    return [key(s) for s in ours], [key(s) for s in theirs]


@pytest.mark.parametrize("config,interpolation", [
    ("rand-m9-n2-inc1", None), ("rand-m9-mstd0.5-inc1", None),
    ("rand-m9-mstd0.5", "bilinear"), ("rand-m6-mstd101-inc1", None)])
def test_op_argument_and_filter_frequencies_match_timm(config, interpolation):
    count = 2500
    ours = [[(n, a, f if n in GEOMETRIC else "") for n, _, a, f in s]
            for s in native_draws(rand_augment(config, interpolation), count, seed=3)]
    theirs = timm_draws(rand_augment(config, interpolation), count)
    a, b = keyed([s for steps in ours for s in steps], [s for steps in theirs for s in steps])
    assert chi_square_p(a, b) > P_MIN
    assert chi_square_p([len(s) for s in ours], [len(s) for s in theirs]) > P_MIN
    names_a, names_b = [k[0] for k in a], [k[0] for k in b]
    assert chi_square_p(names_a, names_b) > P_MIN
    assert chi_square_p(biased(names_a), names_b) < P_MIN  # the test can fail
    # ... and sees a magnitude 3 levels off (timm's own draws at m + 3).
    wrong = re.sub(r"-m(\d+)", lambda m: f"-m{int(m.group(1)) + 3}", config)
    c = timm_draws(rand_augment(wrong, interpolation), count)
    a, c = keyed([s for steps in ours for s in steps], [s for steps in c for s in steps])
    assert chi_square_p(a, c) < P_MIN


# --- RandomResizedCropAndInterpolation, RandomErasing ------------------------

def test_random_interpolation_is_bilinear_or_bicubic_evenly():
    """A crop of the whole image (scale 1, the image's ratio): each sample is
    timm's resize with one of its two filters, each drawn half the time."""
    from timm.data.transforms import RandomResizedCropAndInterpolation as RRCI
    image = photo(30, 40)
    data = png(image)
    crop = RRCI(16, scale=(1, 1), ratio=(4 / 3, 4 / 3), interpolation="random")
    refs = {mode: np.asarray(RRCI(16, scale=(1, 1), ratio=(4 / 3, 4 / 3),
                                  interpolation=mode)(image)).astype(np.int32)
            for mode in ("bilinear", "bicubic")}
    assert np.abs(refs["bilinear"] - refs["bicubic"]).max() > 1
    picks = []
    for index in range(200):
        ours = rt.apply(rt.Compose([crop]), data, index=index).numpy().astype(np.int32)
        ours = ours.reshape(refs["bilinear"].shape)
        match = [m for m, ref in refs.items() if np.abs(ours - ref).max() <= 1]
        assert len(match) == 1, index
        picks.append(match[0])
    assert 70 < picks.count("bicubic") < 130  # binomial(200, 0.5): p < 1e-4 outside


@pytest.mark.parametrize("longest,interpolation", [(0.0, "bilinear"), (1.0, "bicubic"),
                                                   (0.3, "bilinear")])
def test_resize_keep_ratio_pixels_match_timm(longest, interpolation):
    from timm.data.transforms import ResizeKeepRatio
    image = photo(37, 53)
    resize = ResizeKeepRatio((20, 31), longest=longest, interpolation=interpolation)
    ours = rt.apply(rt.Compose([resize]), png(image)).numpy().astype(np.int32)
    theirs = np.asarray(resize(image)).astype(np.int32)
    assert ours.reshape(theirs.shape).shape == theirs.shape
    assert np.abs(ours.reshape(theirs.shape) - theirs).max() <= 1


def test_resize_keep_ratio_random_sizes_match_timm():
    """train_crop_mode 'rkrc' parameters: the resized size, seen as the
    unpadded area of a larger CenterCrop of a uniform image, against timm's
    get_params."""
    from timm.data.transforms import ResizeKeepRatio
    import torchvision.transforms as tv
    resize = ResizeKeepRatio(40, interpolation="random", random_scale_prob=0.5,
                             random_scale_range=(0.8, 1.0), random_scale_area=True,
                             random_aspect_prob=0.5, random_aspect_range=(0.9, 1 / 0.9))
    image = Image.new("RGB", (60, 48), (128, 128, 128))
    pipeline = rt.Compose([resize, tv.CenterCrop(80), tv.PILToTensor()])
    ours = []
    for index in range(1500):
        out = rt.apply(pipeline, png(image), index=index).numpy()
        rows, cols = np.nonzero(out[0])
        ours.append((rows.max() - rows.min() + 1, cols.max() - cols.min() + 1))
    random.seed(2)
    theirs = [tuple(resize.get_params(image, resize.size, resize.longest,
                                      resize.random_scale_prob, resize.random_scale_range,
                                      resize.random_scale_area, resize.random_aspect_prob,
                                      resize.random_aspect_range)) for _ in range(1500)]
    assert chi_square_p(ours, theirs) > P_MIN
    assert chi_square_p(biased(ours), theirs) < P_MIN


def changed(image, clean):
    """Where an erase wrote (Normalize's float rounding aside)."""
    return (np.abs(image - clean) > 1e-4).any(axis=0)


def erased_boxes(images, clean):
    """Per image: None (not erased) or (top, left, h, w) of where it differs."""
    out = []
    for image in images:
        rows, cols = np.nonzero(changed(image, clean))
        out.append(None if not len(rows) else
                   (rows.min(), cols.min(), rows.max() - rows.min() + 1,
                    cols.max() - cols.min() + 1))
    return out


def box_keys(boxes):
    return [("none",) if b is None else (b[2] // 4, b[3] // 4) for b in boxes]


@pytest.mark.parametrize("mode", ["const", "rand", "pixel"])
def test_random_erasing_boxes_and_values_match_timm(mode):
    from timm.data.random_erasing import RandomErasing
    from timm.data.transforms import MaybeToTensor
    import torchvision.transforms as tv
    image = photo(24, 32)
    data = png(image)
    erase = RandomErasing(0.6, mode=mode, device="cpu")
    normalize = tv.Normalize(MEAN, (0.229, 0.224, 0.225))
    clean = normalize(F.to_tensor(image)).numpy()
    count = 1500
    pipeline = rt.Compose([MaybeToTensor(), normalize, erase])
    ours = [rt.apply(pipeline, data, index=i).numpy() for i in range(count)]
    random.seed(1)
    torch.manual_seed(1)
    theirs = [erase(torch.from_numpy(clean.copy())).numpy() for _ in range(count)]
    a, b = box_keys(erased_boxes(ours, clean)), box_keys(erased_boxes(theirs, clean))
    assert chi_square_p(a, b) > P_MIN
    assert chi_square_p(biased(a), b) < P_MIN
    values = [erased_values(x, clean, mode) for x in ours]
    their_values = [erased_values(x, clean, mode) for x in theirs]
    bins = np.linspace(-2.5, 2.5, 11)
    a = list(np.digitize([v for vs in values for v in vs], bins))
    b = list(np.digitize([v for vs in their_values for v in vs], bins))
    if mode == "const":
        assert set(a) == set(b) == {np.digitize(0.0, bins)}
    else:
        assert chi_square_p(a, b) > P_MIN


def erased_values(image, clean, mode):
    """A few erased values: per channel (rand, const) or the first pixels (pixel)."""
    mask = changed(image, clean)
    if not mask.any():
        return []
    inside = image[:, mask]
    return list(inside[:, 0]) if mode != "pixel" else list(inside[:, :4].ravel())


# --- the converter: what create_transform builds --------------------------------

def op_names(transform):
    return [op.to_op()["op"] for op in rt.from_torchvision(transform).transforms]


def test_training_transforms_convert():
    from timm.data import create_transform
    train = create_transform(224, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",
                             interpolation="random", re_prob=0.25, re_mode="pixel")
    assert op_names(train) == ["RandomResizedCrop", "RandomHorizontalFlip", "TimmRandAugment",
                               "ToTensor", "Normalize", "RandomErasing"]
    ops = rt.from_torchvision(train).to_ops()
    assert ops[0]["interpolation"] == "random" and ops[5]["value"] == "random"
    assert ops[2]["magnitude_std"] == 0.5 and ops[2]["translate_const"] == 100
    assert ops[2]["fill"] == [124, 116, 104] and ops[2]["interpolation"] == "random"
    prefetch = create_transform(224, is_training=True, auto_augment="rand-m9-n2-inc1",
                                use_prefetcher=True)
    assert op_names(prefetch)[-1] == "PILToTensor"


@pytest.mark.parametrize("kwargs", [dict(), dict(crop_pct=1.0), dict(use_prefetcher=True)])
def test_eval_transforms_convert(kwargs):
    from timm.data import create_transform
    names = op_names(create_transform(224, is_training=False, **kwargs))
    assert names[:2] == ["Resize", "CenterCrop"]


@pytest.mark.parametrize("kwargs,named", [
    (dict(auto_augment="augmix-m5-w4-d2"), "AugMixAugment"),
    (dict(auto_augment="original-mstd0.5"), "AutoAugment"),
    (dict(auto_augment="rand-m9-tweights"), "RandAugment"),
    (dict(train_crop_mode="rkrc"), "CenterCropOrPad"),
    (dict(re_prob=0.5, re_count=3), "RandomErasing")])
def test_unconverted_timm_ops_are_named(kwargs, named):
    from timm.data import create_transform
    with pytest.raises(_ringloader.OptionError, match=f"timm's {named} has no native op"):
        rt.from_torchvision(create_transform(64, is_training=True, **kwargs))


def write_folder(root, classes=2, per_class=4):
    import os
    for c in range(classes):
        os.makedirs(f"{root}/c{c}")
        for i in range(per_class):
            photo(30 + i, 40, seed=c * 10 + i).save(f"{root}/c{c}/{i}.jpg", quality=90)
    return root


def create_loader(dataset, loader_class, prefetcher, **kwargs):
    """timm's create_loader on `loader_class` (`python -m ringloader` puts
    ringloader.DataLoader in torch.utils.data's place the same way)."""
    from timm.data import create_loader as create
    saved, torch.utils.data.DataLoader = torch.utils.data.DataLoader, loader_class
    try:
        return create(dataset, input_size=(3, 24, 24), batch_size=4, is_training=True,
                      use_prefetcher=prefetcher, device=torch.device("cpu"), num_workers=2,
                      **kwargs)
    finally:
        torch.utils.data.DataLoader = saved


@pytest.mark.parametrize("prefetcher", [False, True])
def test_create_loader_runs_natively(tmp_path, capfd, prefetcher):
    """timm's ImageDataset, create_loader's transforms, worker_init_fn and
    fast_collate (with its prefetcher), through ringloader.DataLoader."""
    import ringloader
    from timm.data import create_dataset
    root = write_folder(str(tmp_path / "images"))
    dataset = create_dataset("", root=root, split="train", is_training=True)
    loader = create_loader(dataset, ringloader.DataLoader, prefetcher,
                           auto_augment="rand-m9-mstd0.5-inc1", re_prob=0.25,
                           re_mode="pixel", interpolation="random")
    inner = loader.loader if prefetcher else loader
    assert inner._converted, capfd.readouterr().err
    batches = list(loader)
    err = capfd.readouterr().err
    assert "Python workers" not in err, err
    images, labels = batches[0]
    assert images.shape == (4, 3, 24, 24) and labels.dtype == torch.int64
    assert images.dtype == torch.float32  # the prefetcher normalizes uint8 batches
    if prefetcher:
        raw, _ = next(iter(inner))
        assert raw.dtype == torch.uint8 and raw.shape == (4, 3, 24, 24)  # fast_collate's
    assert sorted(int(y) for _, ys in batches for y in ys) == [0] * 4 + [1] * 4


def test_augmix_falls_back_with_its_name(tmp_path, capfd):
    import ringloader
    from timm.data import create_dataset, create_transform
    root = write_folder(str(tmp_path / "images"), per_class=2)
    dataset = create_dataset("", root=root, split="train", is_training=True)
    dataset.transform = create_transform(24, is_training=True, auto_augment="augmix-m3")
    loader = ringloader.DataLoader(dataset, batch_size=2, num_workers=0)
    assert not loader._converted
    assert len(list(loader)) == 2
    assert "AugMixAugment has no native op" in capfd.readouterr().err

