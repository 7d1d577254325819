# SPDX-License-Identifier: BSD-3-Clause
"""timm's transforms (what ``timm.data.create_transform`` builds) as native
ops, and timm's ``ImageDataset`` over an image folder as native files.

timm is never imported here: its classes are known by module and qualified
name, their attributes read as timm's own forward passes read them.

- ``RandomResizedCropAndInterpolation`` -> ``RandomResizedCrop`` (its
  ``interpolation='random'``: bilinear or bicubic drawn per sample);
- ``ResizeKeepRatio`` -> ``ResizeKeepRatio`` (transforms/resize_keep_ratio.h);
- ``RandAugment`` built by ``rand_augment_transform`` (``rand-m9-n2-inc1``,
  ``mstd``, ``mmax``, ``p``, ``inc``) -> ``TimmRandAugment``
  (transforms/timm_augment.h): timm's ops, noise, levels, fill and filters;
- ``RandomErasing`` (one box: ``max_count`` 1) in ``const`` / ``rand`` /
  ``pixel`` mode -> ``RandomErasing`` with value 0 / ``random_per_channel``
  / ``random``;
- ``MaybeToTensor`` -> ``ToTensor``; ``MaybePILToTensor``, ``ToNumpy`` ->
  ``PILToTensor`` (the uint8 CHW image fast_collate batches);
  timm's ``ToTensor`` (no scaling) -> ``PILToTensor`` + ``ToDtype(float32)``.

Anything else of timm's (AutoAugment, AugMix, weighted RandAugment,
CenterCropOrPad, RandomCropOrPad, ...) stays in Python workers, with a
message naming it. ``transforms._register`` runs the rewrite first, before
v2's.
"""
import math

from ringloader import transforms as _t
from ringloader._ringloader import OptionError
from ringloader._native.convert_v2 import ToDtype

_NATIVE_AUGMENT_OPS = frozenset((
    "AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "PosterizeIncreasing",
    "PosterizeOriginal", "Solarize", "SolarizeIncreasing", "SolarizeAdd", "Color",
    "ColorIncreasing", "Contrast", "ContrastIncreasing", "Brightness", "BrightnessIncreasing",
    "Sharpness", "SharpnessIncreasing", "ShearX", "ShearY", "TranslateX", "TranslateY",
    "TranslateXRel", "TranslateYRel"))
_LEVEL_DENOM = 10.0  # timm's _LEVEL_DENOM: magnitudes are clamped to it by default


class NotConvertible(OptionError):
    """A timm op with no native form (it runs in Python workers)."""

    def __init__(self, op, why):
        super().__init__(f"timm's {type(op).__name__} has no native op: {why}")


def qualified_name(obj):
    """``module.qualname`` of ``obj``'s class (``timm.data.transforms.ToNumpy``)."""
    cls = type(obj)
    return f"{cls.__module__ or ''}.{cls.__qualname__}"


def is_timm(obj):
    return (type(obj).__module__ or "").startswith("timm.")


class TimmRandAugment(_t._Op):
    """timm's RandAugment, with timm's parameters (``rand_augment_transform``)."""
    name = "TimmRandAugment"

    def __init__(self, ops, num_layers=_t._default("TimmRandAugment", "num_layers"),
                 prob=_t._default("TimmRandAugment", "prob"),
                 magnitude=_t._default("TimmRandAugment", "magnitude"),
                 magnitude_std=_t._default("TimmRandAugment", "magnitude_std"),
                 magnitude_max=_t._default("TimmRandAugment", "magnitude_max"),
                 translate_const=_t._default("TimmRandAugment", "translate_const"),
                 translate_pct=_t._default("TimmRandAugment", "translate_pct"),
                 interpolation=_t._default("TimmRandAugment", "interpolation"),
                 fill=_t._default("TimmRandAugment", "fill")):
        """``magnitude_std`` inf: uniform in [0, magnitude] (timm's mstd > 100);
        ``magnitude_max`` None: timm's 10."""
        unknown = [op for op in ops if op not in _NATIVE_AUGMENT_OPS]
        if unknown:
            raise OptionError(f"TimmRandAugment: no native op for {', '.join(unknown)}")
        self.ops = list(ops)
        self.num_layers = int(num_layers)
        self.prob = float(prob)
        self.magnitude = float(magnitude)
        self.magnitude_std = float(magnitude_std)
        self.magnitude_max = float(magnitude_max or _LEVEL_DENOM)
        self.translate_const = float(translate_const)
        self.translate_pct = float(translate_pct)
        self.interpolation = _t._choice(self.name, "interpolation", interpolation)
        self.fill = [int(v) for v in fill]

    def params(self):
        uniform = math.isinf(self.magnitude_std)
        return {"ops": ",".join(self.ops), "num_layers": self.num_layers, "prob": self.prob,
                "magnitude": self.magnitude,
                "magnitude_std": 0.0 if uniform else self.magnitude_std,
                "magnitude_uniform": uniform, "magnitude_max": self.magnitude_max,
                "translate_const": self.translate_const, "translate_pct": self.translate_pct,
                "interpolation": self.interpolation, "fill": self.fill}


def _rkr_default(param):
    return _t._default("ResizeKeepRatio", param)


class ResizeKeepRatio(_t._Op):
    """timm's ResizeKeepRatio, with timm's parameters."""
    name = "ResizeKeepRatio"

    def __init__(self, size, longest=_rkr_default("longest"),
                 interpolation=_rkr_default("interpolation"),
                 random_scale_prob=_rkr_default("random_scale_prob"),
                 random_scale_range=_rkr_default("random_scale_range"),
                 random_scale_area=_rkr_default("random_scale_area"),
                 random_aspect_prob=_rkr_default("random_aspect_prob"),
                 random_aspect_range=_rkr_default("random_aspect_range")):
        self.size = _t._size_list(size, self.name)
        self.longest = float(longest)
        self.interpolation = _t._choice(self.name, "interpolation", interpolation)
        self.random_scale_prob = float(random_scale_prob)
        self.random_scale_range = [float(v) for v in random_scale_range]
        self.random_scale_area = bool(random_scale_area)
        self.random_aspect_prob = float(random_aspect_prob)
        self.random_aspect_range = [float(v) for v in random_aspect_range]

    def params(self):
        return {"size": self.size, "longest": self.longest, "interpolation": self.interpolation,
                "random_scale_prob": self.random_scale_prob,
                "random_scale_range": self.random_scale_range,
                "random_scale_area": self.random_scale_area,
                "random_aspect_prob": self.random_aspect_prob,
                "random_aspect_range": self.random_aspect_range}


# --- timm op -> native op -----------------------------------------------------

def _mode_name(mode):
    """A PIL resampling filter or torchvision InterpolationMode as our name."""
    value = getattr(mode, "value", mode)
    if isinstance(value, str):
        return value.lower()
    names = {0: "nearest", 2: "bilinear", 3: "bicubic"}  # PIL's Resampling values
    if value in names:
        return names[value]
    raise OptionError(f"interpolation {mode!r} has no native form")


def _interpolation(op, modes):
    """timm's interpolation attribute: one mode, or its random (bilinear, bicubic)."""
    if isinstance(modes, (list, tuple)):
        if [_mode_name(m) for m in modes] != ["bilinear", "bicubic"]:
            raise NotConvertible(op, f"random interpolation among {modes!r}")
        return "random"
    return _mode_name(modes)


def _random_resized_crop(op):
    size = list(op.size)
    return _t.RandomResizedCrop(size, op.scale, op.ratio, _interpolation(op, op.interpolation))


def _resize_keep_ratio(op):
    return ResizeKeepRatio(list(op.size), op.longest, _interpolation(op, op.interpolation),
                           op.random_scale_prob, op.random_scale_range, op.random_scale_area,
                           op.random_aspect_prob, op.random_aspect_range)


def _augment_hparams(op, first):
    """The hparams every AugmentOp shares (else NotConvertible)."""
    def key(a):
        return (a.prob, a.magnitude, a.magnitude_std, a.magnitude_max,
                a.hparams.get("translate_const", 250), a.hparams.get("translate_pct", 0.45),
                tuple(a.kwargs["fillcolor"]), repr(a.kwargs["resample"]))
    if any(key(a) != key(first) for a in op.ops):
        raise NotConvertible(op, "its ops differ in probability, magnitude or hparams")
    return first.hparams


def _rand_augment(op):
    if getattr(op, "choice_weights", None) is not None:
        raise NotConvertible(op, "weighted op choice without replacement (t=weights / 3aw)")
    if not op.ops:
        raise NotConvertible(op, "no ops")
    first = op.ops[0]
    unknown = sorted({a.name for a in op.ops} - _NATIVE_AUGMENT_OPS)
    if unknown:
        raise NotConvertible(op, f"op {', '.join(unknown)} is not native")
    hparams = _augment_hparams(op, first)
    fill = first.kwargs["fillcolor"]
    fill = [fill] if isinstance(fill, (int, float)) else fill
    return TimmRandAugment(
        [a.name for a in op.ops], op.num_layers, first.prob, first.magnitude,
        first.magnitude_std, first.magnitude_max, hparams.get("translate_const", 250),
        hparams.get("translate_pct", 0.45), _interpolation(op, first.kwargs["resample"]), fill)


_ERASING_VALUES = {"const": 0.0, "": 0.0, "rand": "random_per_channel", "pixel": "random"}


def _random_erasing(op):
    if op.min_count != 1 or op.max_count != 1:
        raise NotConvertible(op, f"{op.min_count}..{op.max_count} boxes (native: one)")
    low, high = (math.exp(v) for v in op.log_aspect_ratio)
    return _t.RandomErasing(op.probability, (op.min_area, op.max_area), (low, high),
                            _ERASING_VALUES[op.mode])


def _unscaled_to_tensor(op):
    import torch
    if op.dtype not in (torch.float32, torch.uint8):
        raise NotConvertible(op, f"native batches hold float32 or uint8, not {op.dtype}")
    return [_t.PILToTensor(), ToDtype(str(op.dtype), scale=False)]


_CONVERTERS = {
    "timm.data.transforms.RandomResizedCropAndInterpolation": _random_resized_crop,
    "timm.data.transforms.ResizeKeepRatio": _resize_keep_ratio,
    "timm.data.auto_augment.RandAugment": _rand_augment,
    "timm.data.random_erasing.RandomErasing": _random_erasing,
    "timm.data.transforms.MaybeToTensor": lambda op: _t.ToTensor(),
    "timm.data.transforms.MaybePILToTensor": lambda op: _t.PILToTensor(),
    "timm.data.transforms.ToNumpy": lambda op: _t.PILToTensor(),
    "timm.data.transforms.ToTensor": _unscaled_to_tensor,
}


def convert_op(op):
    """timm's op as a list of native ops; NotConvertible names one with none."""
    converter = _CONVERTERS.get(qualified_name(op))
    if converter is None:
        raise NotConvertible(op, "ringloader does not convert this timm class")
    out = converter(op)
    return out if isinstance(out, list) else [out]


def rewrite(ops):
    """The op list with timm's ops replaced by native ones."""
    out = []
    for op in ops:
        out.extend(convert_op(op) if is_timm(op) else [op])
    return out


# --- timm's ImageDataset over a folder ----------------------------------------

_DATASET = "timm.data.dataset.ImageDataset"
_FOLDER_READER = "timm.data.readers.reader_image_folder.ReaderImageFolder"


def is_dataset(dataset):
    return qualified_name(dataset) == _DATASET


def dataset_fields(dataset, why_not):
    """(mode, paths, labels, classes) of a timm ImageDataset that reads an
    image folder as timm's own __getitem__ does; else ``why_not(reason)``
    (which raises)."""
    if type(dataset).__getitem__.__qualname__ != "ImageDataset.__getitem__":
        why_not("ImageDataset's __getitem__ is overridden")
    if qualified_name(dataset.reader) != _FOLDER_READER:
        why_not(f"its reader {type(dataset.reader).__name__} has no native form")
    if dataset.load_bytes or getattr(dataset, "additional_features", None):
        why_not("load_bytes / additional_features return more than (image, label)")
    mode = dataset.input_img_mode
    if mode not in ("RGB", "L"):
        why_not(f"input_img_mode {mode!r} (native: RGB or L)")
    samples = dataset.reader.samples
    paths = [path for path, _ in samples]
    if any(label is None for _, label in samples):
        why_not("unlabelled samples")
    classes = sorted(dataset.reader.class_to_idx, key=dataset.reader.class_to_idx.get)
    return mode, paths, [int(label) for _, label in samples], classes


def seeds_python_only(worker_init_fn):
    """create_loader's ``partial(_worker_init, worker_seeding='all' | 'part')``:
    it only reseeds numpy in each worker, which native workers never draw
    from (their draws come from the per-sample streams)."""
    func = getattr(worker_init_fn, "func", None)
    return (func is not None and getattr(func, "__module__", "") == "timm.data.loader"
            and getattr(func, "__qualname__", "") == "_worker_init"
            and not worker_init_fn.args
            and worker_init_fn.keywords.get("worker_seeding", "all") in ("all", "part"))


def is_fast_collate(collate):
    return (getattr(collate, "__module__", "") == "timm.data.loader"
            and getattr(collate, "__qualname__", "") == "fast_collate")


_t._register({}, [TimmRandAugment, ResizeKeepRatio], rewrite, first=True)
