# SPDX-License-Identifier: BSD-3-Clause
"""``torchvision.transforms.v2`` pipelines, and the random containers of v1
and v2 (``RandomApply``, ``RandomChoice``, ``RandomOrder``), as native ops.

v2 ops with a v1 counterpart convert through the v1 converters (same
attribute names); what v2 does differently is handled here, on the whole
op list, before the ops convert one by one:

- ``ToImage`` / ``PILToTensor`` may sit anywhere: the ops after it run on
  uint8 tensors in torchvision. They convert only where torchvision's tensor
  kernel gives the PIL kernel's pixels (crops, flips, padding: equal;
  bilinear antialiased resizes: within one level; AugMix: tensors anyway);
  the tensor conversion then moves to the end of the image ops. Any other op
  there runs in Python workers, with a message naming it.
- ``ToDtype`` (and v2's ``ConvertImageDtype``, which is ``ToDtype(scale=True)``)
  compute x * (1 / 255), not ToTensor's x / 255: the native ``ToDtype`` op
  does the same. On a PIL image (before the tensor conversion) both leave
  it alone, so they are dropped there.
- ``ToPureTensor`` and ``Identity`` change nothing in a native batch.
- v2 keeps ``RandomErasing(value="random")`` as ``value=None``; v2's
  ``Resize`` ignores ``antialias`` on PIL images (PIL always antialiases).

``transforms.fold_dtype_conversion`` calls ``rewrite`` first.
"""
from ringloader import transforms as _t
from ringloader._ringloader import OptionError


class NoNativeForm(OptionError):
    """An op that has a native form, but not at its place in this pipeline."""

    def __init__(self, op, why):
        super().__init__(f"{type(op).__name__} has no native op at its place: {why}")


class ToDtype(_t._Op):
    """v2's ToDtype after PILToTensor: ``float32`` (``scale`` for [0, 1]) or ``uint8``."""
    name = "ToDtype"

    def __init__(self, dtype, scale=_t._default("ToDtype", "scale")):
        self.dtype = _t._choice(self.name, "dtype", str(dtype).replace("torch.", ""))
        self.scale = bool(scale)

    def params(self):
        return {"dtype": self.dtype, "scale": self.scale}


def _ops(transforms):
    return [_t.from_torchvision_op(op) for op in rewrite(list(transforms), inside=True)]


class RandomApply(_t._Op):
    name = "RandomApply"

    def __init__(self, transforms, p=_t._default("RandomApply", "p")):
        self.transforms = _ops(transforms)
        self.p = float(p)

    def params(self):
        return {"transforms": [op.to_op() for op in self.transforms], "p": self.p}


class RandomChoice(_t._Op):
    name = "RandomChoice"

    def __init__(self, transforms, p=_t._default("RandomChoice", "p")):
        self.transforms = _ops(transforms)
        self.p = None if p is None else [float(w) for w in p]

    def params(self):
        return {"transforms": [op.to_op() for op in self.transforms], "p": self.p}


class RandomOrder(_t._Op):
    name = "RandomOrder"

    def __init__(self, transforms):
        self.transforms = _ops(transforms)

    def params(self):
        return {"transforms": [op.to_op() for op in self.transforms]}


CONVERTERS = {
    "RandomApply": lambda t: RandomApply(t.transforms, t.p),
    "RandomChoice": lambda t: RandomChoice(t.transforms, t.p),
    "RandomOrder": lambda t: RandomOrder(t.transforms),
}

_CONTAINERS = ("RandomApply", "RandomChoice", "RandomOrder")
_TENSOR_CONVERSIONS = ("ToImage", "PILToTensor")
_DTYPE_OPS = ("ToDtype", "ConvertImageDtype")
_TENSOR_OPS = ("Normalize", "RandomErasing", "ToTensor") + _DTYPE_OPS
# Image ops whose torchvision tensor kernel gives the PIL kernel's pixels.
_SAME_ON_TENSORS = ("CenterCrop", "RandomCrop", "Pad", "RandomHorizontalFlip",
                    "RandomVerticalFlip", "AugMix")
_RESIZES = ("Resize", "RandomResizedCrop")


def _name(op):
    return type(op).__name__


def _is_v2(op):
    return (type(op).__module__ or "").startswith("torchvision.transforms.v2")


def _flatten(ops):
    """Nested v2 Composes inline (v2 accepts them anywhere)."""
    out = []
    for op in ops:
        inner = getattr(op, "transforms", None)
        if _name(op) == "Compose" and inner is not None and not isinstance(op, _t.Compose):
            out.extend(_flatten(inner))
        else:
            out.append(op)
    return out


def _check_on_tensors(op):
    """OK, or NoNativeForm: ``op`` runs on a uint8 tensor in torchvision."""
    name = _name(op)
    if name in _CONTAINERS:
        for child in op.transforms:
            _check_on_tensors(child)
        return
    if name in _SAME_ON_TENSORS or isinstance(op, _t._Op):
        return
    if name in _RESIZES:
        mode = getattr(getattr(op, "interpolation", None), "value", op.interpolation)
        if str(mode).lower() == "bilinear" and getattr(op, "antialias", None) is True:
            return
        raise NoNativeForm(op, "after ToImage/PILToTensor torchvision resizes the tensor; "
                               "ringloader matches that only for bilinear with antialias=True")
    raise NoNativeForm(op, "after ToImage/PILToTensor torchvision runs its tensor kernel; "
                           "ringloader's op gives PIL's pixels")


def convert_dtype(op):
    """A ToDtype/ConvertImageDtype on the uint8 tensor, as ours (v1's
    ConvertImageDtype stays: it divides, like ToTensor, and folds into it)."""
    if not _is_v2(op):
        return op
    import torch
    dtype = op.dtype
    if isinstance(dtype, dict):
        dtype = dtype.get(_image_type(), dtype.get("others"))
    scale = _name(op) == "ConvertImageDtype" or bool(getattr(op, "scale", False))
    if dtype not in (torch.float32, torch.uint8):
        raise NoNativeForm(op, f"native batches hold float32 or uint8, not {dtype}")
    return ToDtype(str(dtype), scale)


def _image_type():
    from torchvision import tv_tensors
    return tv_tensors.Image


def _image_op(op, on_tensor):
    """A v2 image op as the v1 converters take it, checked for its place."""
    if on_tensor:
        _check_on_tensors(op)
    name = _name(op)
    if name in _CONTAINERS and not isinstance(op, _t._Op):
        return CONVERTERS[name](op)
    if not _is_v2(op):
        return op
    if name == "Resize" and not on_tensor:
        return _t.Resize(op.size, op.interpolation, op.max_size, True)
    return op


def _tensor_op(op):
    if _is_v2(op) and _name(op) == "RandomErasing" and op.value is None:
        return _t.RandomErasing(op.p, op.scale, op.ratio, "random")
    if _name(op) in _DTYPE_OPS:
        return convert_dtype(op)
    return op


def rewrite(ops, inside=False):
    """The op list with v2's conversions resolved (see the module doc);
    NoNativeForm names an op that cannot run natively where it is.
    ``inside``: the ops of a container (image ops only)."""
    out, on_tensor, pending = [], False, False
    for op in _flatten(ops):
        name = _name(op)
        if _is_v2(op) and name in ("ToPureTensor", "Identity"):
            continue
        if inside and (name in _TENSOR_OPS or name in _TENSOR_CONVERSIONS):
            raise NoNativeForm(op, "inside a random container only image ops run natively")
        if name in _TENSOR_CONVERSIONS or name == "ToTensor":
            if on_tensor:
                raise NoNativeForm(op, "the image is a tensor already")
            on_tensor = True
            pending = name != "ToTensor"
            if not pending:
                out.append(op)
            continue
        if name in _TENSOR_OPS:
            if name in _DTYPE_OPS and _is_v2(op) and not on_tensor:
                continue  # v2 leaves a PIL image alone
            if pending:
                out.append(_t.PILToTensor())
                pending = False
            out.append(_tensor_op(op))
            continue
        if on_tensor and not pending:
            raise NoNativeForm(op, "an image op after ToTensor, Normalize, ToDtype or "
                                   "RandomErasing has no native form")
        out.append(_image_op(op, on_tensor))
    if pending:
        out.append(_t.PILToTensor())
    return out


_t._register({**CONVERTERS, "ToDtype": convert_dtype},
             [RandomApply, RandomChoice, RandomOrder, ToDtype], rewrite)
