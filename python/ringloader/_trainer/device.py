# SPDX-License-Identifier: BSD-3-Clause
"""DataLoader(device="cuda" / "cuda:N"): native datasets go through the C++
device stage (copy stream, optional uint8 finishing on the GPU); a Python
dataset's collated batch is copied with non_blocking=True from the pinned
ring, whose slot then waits for the copy (release fences) before workers
may overwrite it."""
import torch

from ringloader._ringloader import OptionError


def configure(device, device_normalize, native, options):
    """Fills the native options for `device`; returns the torch.device a
    Python dataset's batches are moved to in Python, or None."""
    if device == "cpu":
        if device_normalize is not None:
            raise OptionError("ringloader: device_normalize needs device='cuda'")
        return None
    if native:
        options["device"] = device
        if device_normalize is not None:  # uint8 batches finished on the GPU
            mean, std = device_normalize
            options["device_normalize_mean"] = [float(m) for m in mean]
            options["device_normalize_std"] = [float(v) for v in std]
        return None
    if not torch.cuda.is_available():
        raise OptionError(f"ringloader: device {device!r} requested, but torch sees "
                          "no CUDA GPU; use device='cpu'")
    if device_normalize is not None:
        raise OptionError("ringloader: device_normalize finishes the uint8 batches of "
                          "native datasets; a Python dataset's fields go to the "
                          "device as they are")
    return torch.device(device)


def move_to(batch, device):
    """`batch` (tensors in lists, tuples, namedtuples, dicts) on `device`."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return type(batch)((k, move_to(v, device)) for k, v in batch.items())
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_to(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_to(v, device) for v in batch)
    return batch
