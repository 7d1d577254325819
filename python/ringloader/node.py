# SPDX-License-Identifier: BSD-3-Clause
"""One loader per machine, one lane per trainer (docs/gpu.md, "Node loader").

The node process::

    node = ringloader.NodeLoader(dataset, batch_size=256, shuffle=True,
                                 num_workers=12, trainers=8,
                                 name="imagenet-train", device="cuda")
    node.serve()            # until its epochs are served, or Ctrl-C

Each trainer (torchrun starts one per GPU; LOCAL_RANK picks its lane)::

    loader = ringloader.DataLoader(attach="imagenet-train")   # attached.py
    for epoch in range(90):
        loader.set_epoch(epoch)
        for images, labels in loader:   # on this trainer's GPU with "cuda"
            ...

The node decodes every trainer's batches with one set of workers (one ring,
one copy of the dataset's index, one process tree) and deals global batch g
to lane g % trainers. A trainer that dies gives its lane back (the slots it
held are reclaimed); a node that dies makes every trainer's next batch
raise ``ringloader.NodeError`` (a ``ConnectionError``).

Trust (docs/security.md): only processes of the node's uid attach
(``allow_group`` widens that to a group's members), and a trainer attaches
only to a node of its own uid (``node_uid``). Trainers map the node's memory
through read-only descriptors. A host-lane batch is still writable without
a copy (``images.sub_(mean)`` works): the trainer's mapping of the ring is
private copy-on-write, so its writes stay in its own pages (dropped when
the batch is released) and never reach the node or another trainer. A trainer that breaks the lane protocol is detached and its lane's
batches are dropped until a trainer attaches again; the others go on.
"""
import time

from ._native import datasets as _native_datasets
from ._trainer import options as _options
from ._ringloader import NodeLoader as _NodeCore
from ._ringloader import OptionError


def _native_source(dataset):
    if hasattr(dataset, "ringloader_dataset_json"):
        return dataset
    converted, target_transform = _native_datasets.convert(dataset)
    if converted is None:
        raise OptionError(
            f"ringloader.NodeLoader: {type(dataset).__name__} is not a dataset the native "
            "workers decode (ringloader.datasets, or a torchvision dataset whose "
            "transforms convert); a node loader runs no Python workers")
    if target_transform is not None:
        raise OptionError("ringloader.NodeLoader: target_transform runs Python per "
                          "label; apply it in the trainer")
    return converted


class NodeLoader:
    """Serves ``trainers`` lanes from one set of native workers.

    Loader arguments as ``ringloader.DataLoader``'s (``batch_size``,
    ``shuffle``, ``num_workers``, ``drop_last``, ``seed``, ``on_error``,
    ``ring_slots``, ``worker_nice``: added to the workers' nice value,
    Default: 0). Node arguments: ``trainers`` (lanes), ``name`` (what
    trainers attach to; Default: ``"default"``), ``device`` (``"cpu"``: lanes
    in shared host memory; ``"cuda"``: lane r on GPU ``devices[r]``, or
    r % GPUs, shared by CUDA IPC), ``lane_slots`` (batches per lane, Default:
    3), ``first_epoch`` and ``epochs`` (0: until ``stop()``), ``allow_group``
    (a group name or gid whose members may attach too; Default: ``None``, only
    this process's uid), ``cuda_release_timeout`` (seconds ``close()`` waits
    for trainers to drop their CUDA lane mappings; Default: 10).

    Every lane gets ``batches_per_trainer`` full batches per epoch: the
    epoch's order is padded by wrapping around (cut with ``drop_last``) to
    whole rounds of ``trainers`` batches.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, num_workers=0,
                 drop_last=False, *, trainers=1, name="default", device="cpu",
                 devices=None, lane_slots=3, first_epoch=0, epochs=0, seed=0,
                 on_error=_options.default("on_error"),
                 ring_slots=_options.default("ring_slots"),
                 hang_timeout=_options.default("hang_timeout_s"), allow_group=None,
                 cuda_release_timeout=10.0, worker_nice=_options.default("worker_nice")):
        source = _native_source(dataset)
        self._source = source  # owns the memfds a converted dataset reads
        options = {
            "batch_size": int(batch_size), "num_workers": int(num_workers),
            "shuffle": bool(shuffle), "drop_last": bool(drop_last),
            "seed": int(seed) & 0xFFFFFFFFFFFFFFFF, "on_error": str(on_error),
            "ring_slots": int(ring_slots), "hang_timeout_s": float(hang_timeout),
            "max_samples_per_epoch": len(dataset), "worker_nice": int(worker_nice),
        }
        node = {"name": str(name), "trainers": int(trainers), "lane_slots": int(lane_slots),
                "device": str(device), "first_epoch": int(first_epoch),
                "epochs": int(epochs), "cuda_release_timeout_s": float(cuda_release_timeout)}
        if allow_group is not None:
            node["allow_group"] = str(allow_group)
        if devices is not None:
            node["devices"] = [int(d) for d in devices]
        self.name, self.trainers, self.device = node["name"], node["trainers"], node["device"]
        self._core = _NodeCore(source.ringloader_dataset_json(),
                               source.ringloader_pipeline_json(), options, node)

    @property
    def batches_per_trainer(self):
        return self._core.batches_per_trainer()

    def start(self):
        """Serves on a background thread (returns at once)."""
        self._core.start()
        return self

    def serve(self):
        """Serves until every epoch is served or ``stop()``; Ctrl-C stops
        it. Raises what ended serving (a bad sample with on_error="raise")."""
        if not self._core.serving():
            self._core.start()
        try:
            while self._core.serving():
                time.sleep(0.1)
        except BaseException:
            self._core.stop()
            self._core.join()
            raise
        self._core.join()

    def stop(self):
        """Makes serving end soon; trainers' next batch raises NodeError."""
        self._core.stop()

    def close(self):
        """Stops serving and releases the workers, the lanes and the name."""
        if self._core is not None:
            self._core.stop()
            self._core = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def stats(self):
        """Batches put into lanes (in all and per lane), attaches, detaches,
        reclaimed slots, violations (trainers detached for a bad control word),
        dropped batches (of their lanes), the node's wait for lanes, and its
        Loader's stats."""
        return self._core.stats()

    def stats_text(self):
        return self._core.stats_text()

    def trainer_pids(self):
        """The attached trainer's pid per lane (0: none)."""
        return self._core.trainer_pids()
