# SPDX-License-Identifier: BSD-3-Clause
"""DataLoader(seeding=...): where Python workers' random state comes from.

* "ringloader" (Default): per-sample streams. Before each sample a worker
  seeds torch, random and numpy from (seed, epoch, index)
  (_workers/worker.py's _Seeder): augmentation does not depend on which
  worker makes a sample, nor on how many there are.
* "torch": as torch's DataLoader. At each iter() that makes an iterator
  (every epoch; the first only with persistent_workers) the base seed is
  drawn from ``generator`` (else torch's default RNG) as torch draws it,
  workers start afresh seeded base_seed + worker_id (torch, random; numpy
  from torch's _generate_state), the user's worker_init_fn runs after, and
  an epoch's batches are dealt round-robin from worker 0
  (WorkerEndpoint.deal_round_robin). A torchvision dataset then stays on
  Python workers: the native converter would draw from per-sample streams."""
from ringloader._ringloader import OptionError

CHOICES = ("ringloader", "torch")


def check(seeding, seed):
    """Refuses an unknown mode, and ``seed`` (the per-sample streams' key)
    with seeding="torch", whose seeds come from the generator."""
    if seeding not in CHOICES:
        raise OptionError(f"ringloader: seeding must be 'ringloader' or 'torch', "
                          f"got {seeding!r}")
    if seeding == "torch" and seed is not None:
        raise OptionError("ringloader: seed= keys ringloader's per-sample streams; "
                          "seeding='torch' draws its seeds from generator (or torch's "
                          "default RNG) as torch does: give one or the other")


def native_allowed(seeding, native):
    """Whether a torchvision dataset may be converted for the C++ workers."""
    return native and seeding != "torch"


def check_source(seeding, decoded_in_cpp):
    """ringloader.datasets run no Python in their workers: no torch seeding."""
    if seeding == "torch" and decoded_in_cpp:
        raise OptionError("ringloader: seeding='torch' seeds Python workers; this "
                          "dataset is decoded by ringloader's C++ workers, whose "
                          "augmentation draws from per-sample streams")
