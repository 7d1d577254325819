# SPDX-License-Identifier: BSD-3-Clause
"""Transforms with torchvision's names, signatures and defaults.

They are descriptions: ringloader's workers run them natively (no Python per
sample). A torchvision ``Compose`` of the supported ops converts
automatically (``from_torchvision``); anything else raises ``OptionError``
naming the op.

Defaults and allowed values are not written here: they come from the C++ op
spec table (transforms/op_specs.cc) through ``_ringloader.op_specs()``, the
one place where every op's parameters are declared.
"""
import json
import numbers

from . import _ringloader
from ._ringloader import OptionError

__all__ = [
    "Compose", "Resize", "CenterCrop", "Pad", "RandomCrop", "RandomResizedCrop",
    "RandomHorizontalFlip", "RandomVerticalFlip", "ToTensor", "PILToTensor",
    "Normalize", "ColorJitter", "Grayscale", "RandomGrayscale", "GaussianBlur",
    "RandomRotation", "RandomAffine", "RandomErasing", "AutoAugment", "RandAugment",
    "TrivialAugmentWide", "AugMix", "RandomApply", "RandomChoice", "RandomOrder", "ToDtype",
    "Custom", "from_torchvision",
    "fast", "pipeline_json", "apply",
]


# {op name: {"doc", "open", "params": {param name: spec}}}, from C++.
OP_SPECS = {op["name"]: dict(op, params={p["name"]: p for p in op["params"]})
            for op in json.loads(_ringloader.op_specs())}


def _default(op, param):
    """``op``'s default for ``param`` (a list becomes a tuple, as torchvision
    writes its defaults)."""
    value = OP_SPECS[op]["params"][param]["default"]
    return tuple(value) if isinstance(value, list) else value


def _choice(op, param, value):
    """``value`` if it is one of the spec's choices, else OptionError listing them."""
    choices = OP_SPECS[op]["params"][param]["choices"]
    if value not in choices:
        raise OptionError(f"{op}: {param} is {value!r}; expected one of: "
                          f"{', '.join(sorted(choices))}")
    return value


def _size_list(size, name):
    if isinstance(size, numbers.Integral):
        return [int(size)]
    if isinstance(size, (list, tuple)) and len(size) in (1, 2):
        return [int(s) for s in size]
    raise OptionError(f"{name}: size must be an int or a sequence of 1 or 2 "
                      f"ints, got {size!r}")


def _interpolation(mode, op):
    value = getattr(mode, "value", mode)  # torchvision InterpolationMode
    if isinstance(value, str):
        return _choice(op, "interpolation", value.lower())
    raise OptionError(f"interpolation {mode!r} is not supported")


class _Op:
    name = ""

    def params(self):
        return {}

    def to_op(self):
        return {"op": self.name, **self.params()}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{self.name}({args})"


class Compose:
    """A pipeline. ``mode="exact"`` (default) gives torchvision's pixels;
    ``mode="fast"`` runs the same ops and random draws approximately and
    faster (reduced-scale JPEG decoding, OpenCV resizing; see
    docs/transforms.md for its measured PSNR)."""

    def __init__(self, transforms, mode="exact"):
        if mode not in ("exact", "fast"):
            raise OptionError(f"Compose: mode must be 'exact' or 'fast', got {mode!r}")
        self.transforms = [from_torchvision_op(t) for t in fold_dtype_conversion(transforms)]
        self.mode = mode

    def to_ops(self):
        return [t.to_op() for t in self.transforms]

    def to_pipeline(self):
        """The pipeline as the C++ side reads it (JSON-ready)."""
        if self.mode == "exact":
            return self.to_ops()
        return {"mode": self.mode, "ops": self.to_ops()}

    def __repr__(self):
        ops = ", ".join(repr(t) for t in self.transforms)
        suffix = f", mode={self.mode!r}" if self.mode != "exact" else ""
        return f"Compose({ops}{suffix})"


class Resize(_Op):
    name = "Resize"

    def __init__(self, size, interpolation=_default("Resize", "interpolation"),
                 max_size=_default("Resize", "max_size"), antialias=None):
        self.size = _size_list(size, "Resize")
        self.interpolation = _interpolation(interpolation, self.name)
        self.max_size = max_size
        # torchvision's None means "the backend's default": PIL antialiases.
        self.antialias = (_default("Resize", "antialias") if antialias is None
                          else bool(antialias))

    def params(self):
        out = {"size": self.size, "interpolation": self.interpolation,
               "antialias": self.antialias}
        if self.max_size is not None:
            out["max_size"] = int(self.max_size)
        return out


class CenterCrop(_Op):
    name = "CenterCrop"

    def __init__(self, size):
        self.size = _size_list(size, "CenterCrop")

    def params(self):
        return {"size": self.size}


class RandomCrop(_Op):
    name = "RandomCrop"

    def __init__(self, size, padding=_default("RandomCrop", "padding"),
                 pad_if_needed=_default("RandomCrop", "pad_if_needed"),
                 fill=_default("RandomCrop", "fill"),
                 padding_mode=_default("RandomCrop", "padding_mode")):
        self.size = _size_list(size, "RandomCrop")
        if padding is None:
            self.padding = []
        elif isinstance(padding, numbers.Integral):
            self.padding = [int(padding)]
        else:
            self.padding = [int(p) for p in padding]
        self.pad_if_needed = bool(pad_if_needed)
        self.fill = [int(fill)] if isinstance(fill, numbers.Number) else [int(f) for f in fill]
        self.padding_mode = _choice(self.name, "padding_mode", padding_mode)

    def params(self):
        return {"size": self.size, "padding": self.padding,
                "pad_if_needed": self.pad_if_needed, "fill": self.fill,
                "padding_mode": self.padding_mode}


class Pad(_Op):
    name = "Pad"

    def __init__(self, padding, fill=_default("Pad", "fill"),
                 padding_mode=_default("Pad", "padding_mode")):
        self.padding = ([int(padding)] if isinstance(padding, numbers.Integral)
                        else [int(p) for p in padding])
        self.fill = [int(fill)] if isinstance(fill, numbers.Number) else [int(f) for f in fill]
        self.padding_mode = _choice(self.name, "padding_mode", padding_mode)

    def params(self):
        return {"padding": self.padding, "fill": self.fill,
                "padding_mode": self.padding_mode}


class RandomResizedCrop(_Op):
    name = "RandomResizedCrop"

    def __init__(self, size, scale=_default("RandomResizedCrop", "scale"),
                 ratio=_default("RandomResizedCrop", "ratio"),
                 interpolation=_default("RandomResizedCrop", "interpolation"),
                 antialias=None):
        self.size = _size_list(size, "RandomResizedCrop")
        self.scale = [float(s) for s in scale]
        self.ratio = [float(r) for r in ratio]
        self.interpolation = _interpolation(interpolation, self.name)

    def params(self):
        return {"size": self.size, "scale": self.scale, "ratio": self.ratio,
                "interpolation": self.interpolation}


class RandomHorizontalFlip(_Op):
    name = "RandomHorizontalFlip"

    def __init__(self, p=_default("RandomHorizontalFlip", "p")):
        self.p = float(p)

    def params(self):
        return {"p": self.p}


class RandomVerticalFlip(RandomHorizontalFlip):
    name = "RandomVerticalFlip"

    def __init__(self, p=_default("RandomVerticalFlip", "p")):
        super().__init__(p)


class Custom(_Op):
    """An op from a C++ shared library (include/ringloader/custom_op.h),
    loaded by path in the trainer and in every worker; ``params`` go to the
    op's constructor as JSON."""
    name = "Custom"

    def __init__(self, library, name, **params):
        self.library = str(library)
        self.op_name = str(name)
        self.extra = params

    def params(self):
        return {"library": self.library, "name": self.op_name, **self.extra}


class ToTensor(_Op):
    name = "ToTensor"


class PILToTensor(_Op):
    name = "PILToTensor"


class Normalize(_Op):
    name = "Normalize"

    def __init__(self, mean, std, inplace=_default("Normalize", "inplace")):
        self.mean = [float(m) for m in mean]
        self.std = [float(s) for s in std]

    def params(self):
        return {"mean": self.mean, "std": self.std}


def _number_or_list(value, name, sizes=(2,)):
    """A number, or a sequence of `sizes` numbers, as floats (None stays)."""
    if value is None or isinstance(value, numbers.Number):
        return None if value is None else float(value)
    if isinstance(value, (list, tuple)) and len(value) in sizes:
        return [float(v) for v in value]
    raise OptionError(f"{name} must be a number or a sequence of "
                      f"{' or '.join(map(str, sizes))} numbers, got {value!r}")


def _fill(fill, op):
    if fill is None:  # torchvision's None: the spec's default
        fill = _default(op, "fill")
    if isinstance(fill, numbers.Number):
        return [float(fill)]
    return [float(f) for f in fill]


class ColorJitter(_Op):
    """Ranges as torchvision takes them: a number or (min, max)."""
    name = "ColorJitter"

    def __init__(self, brightness=_default("ColorJitter", "brightness"),
                 contrast=_default("ColorJitter", "contrast"),
                 saturation=_default("ColorJitter", "saturation"),
                 hue=_default("ColorJitter", "hue")):
        # torchvision keeps None for "leave alone"; 0 means the same here.
        self.brightness = _number_or_list(brightness, "brightness") or 0.0
        self.contrast = _number_or_list(contrast, "contrast") or 0.0
        self.saturation = _number_or_list(saturation, "saturation") or 0.0
        self.hue = _number_or_list(hue, "hue") or 0.0

    def params(self):
        return {"brightness": self.brightness, "contrast": self.contrast,
                "saturation": self.saturation, "hue": self.hue}


class Grayscale(_Op):
    name = "Grayscale"

    def __init__(self, num_output_channels=_default("Grayscale", "num_output_channels")):
        self.num_output_channels = int(num_output_channels)

    def params(self):
        return {"num_output_channels": self.num_output_channels}


class RandomGrayscale(_Op):
    name = "RandomGrayscale"

    def __init__(self, p=_default("RandomGrayscale", "p")):
        self.p = float(p)

    def params(self):
        return {"p": self.p}


class GaussianBlur(_Op):
    name = "GaussianBlur"

    def __init__(self, kernel_size, sigma=_default("GaussianBlur", "sigma")):
        self.kernel_size = _size_list(kernel_size, "GaussianBlur")
        self.sigma = _number_or_list(sigma, "sigma", (1, 2))

    def params(self):
        return {"kernel_size": self.kernel_size, "sigma": self.sigma}


class RandomRotation(_Op):
    name = "RandomRotation"

    def __init__(self, degrees, interpolation=_default("RandomRotation", "interpolation"),
                 expand=_default("RandomRotation", "expand"),
                 center=_default("RandomRotation", "center"),
                 fill=_default("RandomRotation", "fill")):
        self.degrees = _number_or_list(degrees, "degrees")
        self.interpolation = _interpolation(interpolation, self.name)
        self.expand = bool(expand)
        self.center = _number_or_list(center, "center")
        self.fill = _fill(fill, self.name)

    def params(self):
        return {"degrees": self.degrees, "interpolation": self.interpolation,
                "expand": self.expand, "center": self.center, "fill": self.fill}


class RandomAffine(_Op):
    name = "RandomAffine"

    def __init__(self, degrees, translate=_default("RandomAffine", "translate"),
                 scale=_default("RandomAffine", "scale"),
                 shear=_default("RandomAffine", "shear"),
                 interpolation=_default("RandomAffine", "interpolation"),
                 fill=_default("RandomAffine", "fill"),
                 center=_default("RandomAffine", "center")):
        self.degrees = _number_or_list(degrees, "degrees")
        self.translate = _number_or_list(translate, "translate")
        self.scale = _number_or_list(scale, "scale")
        self.shear = _number_or_list(shear, "shear", (1, 2, 4))
        self.interpolation = _interpolation(interpolation, self.name)
        self.fill = _fill(fill, self.name)
        self.center = _number_or_list(center, "center")

    def params(self):
        return {"degrees": self.degrees, "translate": self.translate,
                "scale": self.scale, "shear": self.shear,
                "interpolation": self.interpolation, "fill": self.fill,
                "center": self.center}


class RandomErasing(_Op):
    """Runs on the tensor: after ToTensor (or PILToTensor), like torchvision."""
    name = "RandomErasing"

    def __init__(self, p=_default("RandomErasing", "p"),
                 scale=_default("RandomErasing", "scale"),
                 ratio=_default("RandomErasing", "ratio"),
                 value=_default("RandomErasing", "value"),
                 inplace=_default("RandomErasing", "inplace")):
        self.p = float(p)
        self.scale = [float(s) for s in scale]
        self.ratio = [float(r) for r in ratio]
        if isinstance(value, str):
            self.value = value
        else:
            self.value = _number_or_list(value, "value", (1, 3))

    def params(self):
        return {"p": self.p, "scale": self.scale, "ratio": self.ratio,
                "value": self.value}


_TORCHVISION_CONVERTERS = {
    "Resize": lambda t: Resize(t.size, t.interpolation, t.max_size,
                               getattr(t, "antialias", None)),
    "CenterCrop": lambda t: CenterCrop(t.size),
    "Pad": lambda t: Pad(t.padding, t.fill, t.padding_mode),
    "RandomCrop": lambda t: RandomCrop(t.size, t.padding, t.pad_if_needed,
                                       t.fill, t.padding_mode),
    "RandomResizedCrop": lambda t: RandomResizedCrop(t.size, t.scale, t.ratio,
                                                     t.interpolation),
    "RandomHorizontalFlip": lambda t: RandomHorizontalFlip(t.p),
    "RandomVerticalFlip": lambda t: RandomVerticalFlip(t.p),
    "ToTensor": lambda t: ToTensor(),
    "PILToTensor": lambda t: PILToTensor(),
    "Normalize": lambda t: Normalize(t.mean, t.std),
    "ColorJitter": lambda t: ColorJitter(t.brightness, t.contrast, t.saturation, t.hue),
    "Grayscale": lambda t: Grayscale(t.num_output_channels),
    "RandomGrayscale": lambda t: RandomGrayscale(t.p),
    "GaussianBlur": lambda t: GaussianBlur(t.kernel_size, t.sigma),
    "RandomRotation": lambda t: RandomRotation(t.degrees, t.interpolation, t.expand,
                                               t.center, t.fill),
    "RandomAffine": lambda t: RandomAffine(t.degrees, t.translate, t.scale, t.shear,
                                           t.interpolation, t.fill, t.center),
    "RandomErasing": lambda t: RandomErasing(t.p, t.scale, t.ratio, t.value),
}


# The AutoAugment family, transforms.v2 and timm's transforms live in modules
# of their own (ringloader/_native/convert_autoaugment.py, convert_v2.py,
# convert_timm.py), built on the
# classes above. They register their classes, converters and pipeline
# rewrite here when the package loads (ringloader/__init__.py imports them
# after this module), so this module imports neither: no import cycle.
_REWRITES = []


def _register(converters, classes, rewrite=None, first=False):
    """Adds an extension module's torchvision converters and public classes
    (``ringloader.transforms.AutoAugment`` ...) and its rewrite of an op list
    (``first``: before the others, for one that replaces foreign ops by ours)."""
    _TORCHVISION_CONVERTERS.update(converters)
    globals().update({cls.__name__: cls for cls in classes})
    if rewrite is not None:
        _REWRITES.insert(0 if first else len(_REWRITES), rewrite)


def fold_dtype_conversion(ops):
    """``PILToTensor`` then ``ConvertImageDtype(torch.float)`` is ``ToTensor``,
    bit for bit (both divide the uint8 values by 255 in float32): the form
    torchvision's classification presets use."""
    import torch
    for rewrite in _REWRITES:
        ops = rewrite(ops)
    out = []
    for op in ops:
        if (type(op).__name__ == "ConvertImageDtype" and out
                and type(out[-1]).__name__ == "PILToTensor"
                and getattr(op, "dtype", None) == torch.float32):
            out[-1] = ToTensor()
        else:
            out.append(op)
    return out


def from_torchvision_op(transform):
    """One op: ours as is, torchvision's converted, anything else refused."""
    if isinstance(transform, _Op):
        return transform
    name = type(transform).__name__
    module = type(transform).__module__ or ""
    if module.startswith("torchvision") and name in _TORCHVISION_CONVERTERS:
        return _TORCHVISION_CONVERTERS[name](transform)
    supported = ", ".join(sorted(_TORCHVISION_CONVERTERS))
    raise OptionError(f"transform {name} ({module}) cannot run natively in "
                      f"ringloader; supported: {supported}. Wrap your dataset "
                      f"as a plain Python Dataset to run arbitrary transforms.")


def from_torchvision(transform):
    """A ringloader Compose from a torchvision Compose, op, or None."""
    if transform is None:
        return Compose([])
    if isinstance(transform, Compose):
        return transform
    ops = getattr(transform, "transforms", None)
    if ops is not None and type(transform).__name__ == "Compose":
        return Compose(ops)
    return Compose([transform])


def fast(transform):
    """``transform`` (torchvision's or ours) as a fast-mode pipeline."""
    return Compose(from_torchvision(transform).transforms, mode="fast")


def pipeline_json(transform):
    return json.dumps(from_torchvision(transform).to_pipeline())


def apply(transform, image_bytes, mode="RGB", seed=0, epoch=0, index=0):
    """Run a pipeline on one encoded image in this process; returns the
    tensor a worker would write for sample ``index`` of ``epoch``."""
    from torch.utils import dlpack
    from . import _ringloader
    capsule = _ringloader.apply_pipeline(pipeline_json(transform), bytes(image_bytes),
                                         mode, seed, epoch, index)
    return dlpack.from_dlpack(capsule)
