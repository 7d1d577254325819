# SPDX-License-Identifier: BSD-3-Clause
"""How a map-style dataset's Python workers make batches, from the
loader's collate_fn (_workers/worker.py's _BatchFiller reads it)."""
import warnings

from torch.utils.data._utils.collate import default_collate

from ringloader._ringloader import OptionError


def worker_batching(args, collate_fn, max_batch_bytes):
    """The default collate's batches are laid out per sample and collated
    in the trainer as views (fastest, and it falls back to collating in the
    worker for samples that outgrow sample 0's layout); a custom collate_fn
    runs in the workers, as torch's does; unbatched samples go through
    collate_fn there too. A collate_fn that cannot be pickled (torch's
    forked workers never pickle it) runs in the trainer instead, said once.
    `args`: _arguments.resolve's result."""
    if int(max_batch_bytes) < 1:
        raise OptionError(f"ringloader: max_batch_bytes must be >= 1, got {max_batch_bytes}")
    batching = {"max_batch_bytes": int(max_batch_bytes), "collate_in_trainer": False}
    if collate_fn is default_collate and not args.unbatched:
        collate_fn = None  # the fused default collate
    elif not _picklable(collate_fn):
        if args.unbatched:
            raise OptionError("ringloader: batch_size=None runs collate_fn in the "
                              f"workers, and {collate_fn!r} cannot be pickled")
        warnings.warn(f"ringloader: collate_fn {collate_fn!r} cannot be pickled, so it "
                      "runs in the trainer, not in the workers as with torch")
        return dict(batching, mode="structured", collate_fn=None, collate_in_trainer=True)
    if args.unbatched:
        return dict(batching, mode="unbatched", collate_fn=collate_fn)
    if collate_fn is None:
        return dict(batching, mode="structured", collate_fn=None)
    return dict(batching, mode="collate", collate_fn=collate_fn)


def _picklable(function):
    import cloudpickle
    try:
        cloudpickle.dumps(function)
    except Exception:  # noqa: BLE001  (any pickling failure)
        return False
    return True
