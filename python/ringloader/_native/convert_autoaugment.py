# SPDX-License-Identifier: BSD-3-Clause
"""The AutoAugment family as native ops: ``AutoAugment``, ``RandAugment``,
``TrivialAugmentWide`` and ``AugMix`` with torchvision's signatures and
defaults (from the op spec table), and their torchvision converters.

torchvision's classes convert as they are: their policy, bins, severity,
interpolation and fill become the native op's parameters; the draws come
from the sample's random stream with torchvision's distributions
(transforms/auto_augment.h), the pixels are torchvision's for the same
draws. ``transforms.py`` registers these at import.
"""
import numbers

from ringloader import transforms as _t
from ringloader._ringloader import OptionError


def _int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise OptionError(f"{name} must be an int, got {value!r}")
    return int(value)


def _augment_fill(fill):
    """torchvision's None stays None (0 for PIL); a number or a sequence."""
    if fill is None:
        return None
    if isinstance(fill, numbers.Number):
        return [float(fill)]
    return [float(f) for f in fill]


class AutoAugment(_t._Op):
    name = "AutoAugment"

    def __init__(self, policy=_t._default("AutoAugment", "policy"),
                 interpolation=_t._default("AutoAugment", "interpolation"),
                 fill=_t._default("AutoAugment", "fill")):
        value = getattr(policy, "value", policy)  # AutoAugmentPolicy
        self.policy = _t._choice(self.name, "policy", value)
        self.interpolation = _t._interpolation(interpolation, self.name)
        self.fill = _augment_fill(fill)

    def params(self):
        return {"policy": self.policy, "interpolation": self.interpolation, "fill": self.fill}


class RandAugment(_t._Op):
    name = "RandAugment"

    def __init__(self, num_ops=_t._default("RandAugment", "num_ops"),
                 magnitude=_t._default("RandAugment", "magnitude"),
                 num_magnitude_bins=_t._default("RandAugment", "num_magnitude_bins"),
                 interpolation=_t._default("RandAugment", "interpolation"),
                 fill=_t._default("RandAugment", "fill")):
        self.num_ops = _int(num_ops, "num_ops")
        self.magnitude = _int(magnitude, "magnitude")
        self.num_magnitude_bins = _int(num_magnitude_bins, "num_magnitude_bins")
        self.interpolation = _t._interpolation(interpolation, self.name)
        self.fill = _augment_fill(fill)

    def params(self):
        return {"num_ops": self.num_ops, "magnitude": self.magnitude,
                "num_magnitude_bins": self.num_magnitude_bins,
                "interpolation": self.interpolation, "fill": self.fill}


class TrivialAugmentWide(_t._Op):
    name = "TrivialAugmentWide"

    def __init__(self, num_magnitude_bins=_t._default("TrivialAugmentWide", "num_magnitude_bins"),
                 interpolation=_t._default("TrivialAugmentWide", "interpolation"),
                 fill=_t._default("TrivialAugmentWide", "fill")):
        self.num_magnitude_bins = _int(num_magnitude_bins, "num_magnitude_bins")
        self.interpolation = _t._interpolation(interpolation, self.name)
        self.fill = _augment_fill(fill)

    def params(self):
        return {"num_magnitude_bins": self.num_magnitude_bins,
                "interpolation": self.interpolation, "fill": self.fill}


class AugMix(_t._Op):
    """Runs its ops on tensors, as torchvision's AugMix does (nearest or
    bilinear only)."""
    name = "AugMix"

    def __init__(self, severity=_t._default("AugMix", "severity"),
                 mixture_width=_t._default("AugMix", "mixture_width"),
                 chain_depth=_t._default("AugMix", "chain_depth"),
                 alpha=_t._default("AugMix", "alpha"),
                 all_ops=_t._default("AugMix", "all_ops"),
                 interpolation=_t._default("AugMix", "interpolation"),
                 fill=_t._default("AugMix", "fill")):
        self.severity = _int(severity, "severity")
        self.mixture_width = _int(mixture_width, "mixture_width")
        self.chain_depth = _int(chain_depth, "chain_depth")
        self.alpha = float(alpha)
        self.all_ops = bool(all_ops)
        self.interpolation = _t._interpolation(interpolation, self.name)
        self.fill = _augment_fill(fill)

    def params(self):
        return {"severity": self.severity, "mixture_width": self.mixture_width,
                "chain_depth": self.chain_depth, "alpha": self.alpha,
                "all_ops": self.all_ops, "interpolation": self.interpolation,
                "fill": self.fill}


CONVERTERS = {
    "AutoAugment": lambda t: AutoAugment(t.policy, t.interpolation, t.fill),
    "RandAugment": lambda t: RandAugment(t.num_ops, t.magnitude, t.num_magnitude_bins,
                                         t.interpolation, t.fill),
    "TrivialAugmentWide": lambda t: TrivialAugmentWide(t.num_magnitude_bins,
                                                       t.interpolation, t.fill),
    "AugMix": lambda t: AugMix(t.severity, t.mixture_width, t.chain_depth, t.alpha,
                               t.all_ops, t.interpolation, t.fill),
}

_t._register(CONVERTERS, [AutoAugment, RandAugment, TrivialAugmentWide, AugMix])
