# SPDX-License-Identifier: BSD-3-Clause
"""WebDataset-style tar shards: ``TarShards`` (docs/tar_shards.md)."""
import bisect as _bisect
import itertools as _itertools
import json
import os

from .. import _ringloader
from .._native.sample_views import TargetList
from .base import NativeDataset, _torchvision_equivalent


# TarShardOptions' defaults (include/ringloader/dataset.h), declared once.
_TAR_DEFAULTS = _ringloader.tar_shard_defaults()


class TarShards(NativeDataset):
    """WebDataset-style tar shards: ``000123.jpg`` + ``000123.cls`` is one
    sample (label = the integer text of ``.cls``, -1 without one).

    ``urls`` is a path, a brace pattern (``"train-{0000..0099}.tar"``,
    ``"{a,b}.tar"``), a ``"pipe:<command>"`` whose stdout is a shard, or a
    list of those. The shards are indexed once, here. With
    ``ringloader.DataLoader(..., shuffle=True)`` and no sampler, each epoch
    permutes the shard order and mixes samples through a seeded buffer of
    ``shuffle_buffer`` samples, so workers read shards front to back; any
    sampler still works (a random one reads shards at random places).
    The samples' index lives in one native table (a sealed memfd every
    worker maps read-only; ``docs/index.md``, "Tar shards"): ``targets`` is
    a read-only view of its labels (``numpy.asarray`` is zero-copy).

    Shard cache (``docs/tar_shards.md``): with ``cache_dir``, each shard
    (``pipe:`` ones; local ones too with ``cache_local=True``) is fetched
    once per node into that folder and read from there by every worker and
    every loader sharing it (one fetch per shard, others wait on its lock),
    ``prefetch_shards`` ahead of the epoch order. The folder keeps at most
    ``cache_limit_bytes`` (Default: 16 GiB; least recently used shards are
    deleted). A fetch that fails or is cut short is tried ``fetch_attempts``
    times (Default: 3), then raises ``DataIOError`` naming the shard, the
    command's exit status and its stderr. The folder must be your own and
    writable by no one else (created 0700 when missing); another user's, or
    one others may write (as ``/tmp``), raises ``DataIOError`` naming it.

    Shard index (``docs/tar_shards.md``, "Shard index"): ``index`` is the
    JSON file ``ringloader-shard`` writes next to the shards it makes (or
    with ``--index-only`` for existing ones; a path or ``"pipe:<command>"``).
    Construction then reads it instead of every shard, so ``pipe:`` shards
    are first read by the workers. ``urls`` may be ``None`` to take the
    index's shard list. A corrupt index raises ``DataIOError``, one for
    other shards ``OptionError``, a stale one ``DataIOError`` naming the
    shard and "stale index". A plain wids index (``"nsamples"`` per shard
    only, as ``widsindex`` writes it) serves ``pipe:`` shards without a
    cache: workers find each sample by streaming its shard, epochs and
    ``state_dict`` are the full index's, ``counts_only`` is True and
    ``targets`` raises ``OptionError`` (labels are read from the shards as
    they stream; ``docs/tar_shards.md``, "A plain wids index"). Without
    an index, construction reads ``index_streams`` shards at once (Default:
    8): a ``pipe:`` download is usually limited per connection. When every
    shard is ``pipe:`` and there is no ``cache_dir``, it reads them in the
    background instead (``index_in_background``, Default: True): it returns
    at once, and a DataLoader's first epoch starts after its first shard
    is indexed, with the order a full index gives (``docs/tar_shards.md``,
    "Indexing while reading"). ``len()``, ``shard_sizes``, ``targets``,
    ``len(loader)`` and ``state_dict()`` wait for the index.

    Private cache (``private_cache``, Default: True): with no ``cache_dir``
    and no ``index``, when every shard is ``pipe:``, the shards are fetched
    once into a folder of this process's own (``$TMPDIR/ringloader-shards-*``,
    mode 0700), removed when the dataset and its loaders are gone or the
    process exits (after a kill -9, by the next one). Indexing in the
    background fills it in the first epoch's shard order and workers read
    the copies, so a shuffled epoch runs each command once, not once per
    worker and per restart. It keeps at most half the free space of its
    file system, at most ``cache_limit_bytes``. ``private_cache=False``
    streams as before.
    """

    ringloader_native_shuffle = True

    def __init__(self, urls, transform=None, target_transform=None,
                 shuffle_buffer=_TAR_DEFAULTS["shuffle_buffer"], mode="RGB", *, cache_dir=None,
                 cache_limit_bytes=_TAR_DEFAULTS["cache_limit_bytes"],
                 prefetch_shards=_TAR_DEFAULTS["prefetch_shards"],
                 cache_local=_TAR_DEFAULTS["cache_local"],
                 fetch_attempts=_TAR_DEFAULTS["fetch_attempts"], index=None,
                 index_streams=_TAR_DEFAULTS["index_streams"],
                 index_in_background=_TAR_DEFAULTS["index_in_background"],
                 private_cache=_TAR_DEFAULTS["private_cache"]):
        if urls is None:
            urls = []
        elif isinstance(urls, (str, os.PathLike)):
            urls = [urls]
        urls = [os.fspath(u) for u in urls]
        cache_dir = os.path.abspath(os.fspath(cache_dir)) if cache_dir else ""
        index = os.fspath(index) if index else ""
        handle = _ringloader.tar_shards(
            urls, int(shuffle_buffer), mode, cache_dir, int(cache_limit_bytes),
            int(prefetch_shards), bool(cache_local), int(fetch_attempts), index,
            int(index_streams), bool(index_in_background), bool(private_cache))
        super().__init__({"kind": "tar"}, transform, target_transform)
        self.shuffle_buffer = int(shuffle_buffer)
        self.cache_dir = cache_dir or None
        self.index = index or None
        self.mode = mode
        self._set_handle(handle)

    # The samples live in the native tar sample table (a sealed memfd every
    # worker maps read-only, docs/tar_shards.md): the handle owns it, its
    # description names it, and ``targets`` is a view of its labels.
    def _set_handle(self, handle):
        self._tar = handle
        # Shards still being indexed (index_in_background) have a list, not
        # yet sizes: what needs sizes reads them on first use, and waits.
        self.urls = json.loads(handle.shard_named_json() if handle.indexing()
                               else handle.json())["shards"]
        # Read on first use: a counts-only index raises OptionError there.
        self.targets = TargetList(handle)

    def _described(self, key):
        description = self.__dict__.get("_index_description")
        if description is None:
            description = self.__dict__["_index_description"] = json.loads(self._tar.json())
        return description.get(key)

    @property
    def shard_sizes(self):
        return self._described("shard_sizes")

    @property
    def counts_only(self):
        return bool(self._described("unplaced"))

    @property
    def _manifest(self):
        return self._described("manifest")

    @property
    def _shard_ends(self):
        return list(_itertools.accumulate(self.shard_sizes))

    @property
    def ringloader_indexing(self):
        """Whether the shards are still being indexed in the background
        (never waits)."""
        return self._tar.indexing()

    def __len__(self):
        return len(self._tar)

    def ringloader_dataset_json(self):
        return self._tar.json()

    def ringloader_dataset_handle(self):
        return self._tar

    def _label(self, index):
        return self._tar.label(index)

    # A pickle names the table by the trainer's /proc/<pid>/fd path, as
    # FileList's does: valid while the trainer lives.
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_tar"] = self._tar.json()
        state.pop("targets", None)
        state.pop("_index_description", None)
        return state

    def __setstate__(self, state):
        handle = _ringloader.dataset_from_json(state.pop("_tar"))
        self.__dict__.update(state)
        self._set_handle(handle)

    def member_name(self, index):
        """``"<shard> member <name>"``: where sample ``index`` lives
        (``"<shard> sample <k>"`` for a counts-only index, which names no
        member)."""
        if self.counts_only:
            index = range(len(self))[index]  # IndexError as a list's
            shard = _bisect.bisect_right(self._shard_ends, index)
            first = self._shard_ends[shard - 1] if shard else 0
            return f"{self.urls[shard]} sample {index - first}"
        shard, _, _, _, name = self._tar.tar_sample(index)
        return f"{shard} member {name}"

    def __getitem__(self, index):
        import io

        from PIL import Image
        # Read as a worker reads it (TarMemberReader): a shard that changed
        # since it was indexed is an error naming it, not another image; a
        # counts-only index's label comes from the shard, as the worker's.
        data, label = self._tar.tar_sample_read(index)
        image = Image.open(io.BytesIO(data)).convert(self.mode)
        if self.transform is not None:
            image = _torchvision_equivalent(self.transform)(image)
        return image, label
