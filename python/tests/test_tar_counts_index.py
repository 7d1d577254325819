# SPDX-License-Identifier: BSD-3-Clause
"""TarShards(pipe_urls, index=<a plain wids index>): per-shard counts only
(as WebDataset's ``widsindex`` writes them) start pipe: shards at once; the
workers find each sample by streaming its shard, so every epoch, resume and
mix gives what the full index gives. A count the shard does not match is a
named "stale index" error, and what needs labels up front says how to write
the full index."""
import json
import re

import pytest
import torch

import ringloader
from ringloader import transforms as T
from test_tar_shard_index import indexed  # noqa: F401 (a fixture)
from test_tar_shards import batches

PIPELINE = T.Compose([T.RandomResizedCrop(8), T.ToTensor()])


@pytest.fixture
def counted(indexed, tmp_path):
    """pipe: shards that count their reads, their full index and a plain
    wids index of the same shards (counts only, as widsindex writes)."""
    urls, full, runs = indexed
    with open(full) as f:
        manifest = json.load(f)
    wids = {"__kind__": "wids-shard-index-v1", "wids_version": 1,
            "shardlist": [{"url": e["url"], "nsamples": e["nsamples"], "filesize": e["filesize"]}
                          for e in manifest["shardlist"]]}
    counts = str(tmp_path / "wids.json")
    with open(counts, "w") as f:
        json.dump(wids, f)
    runs.write_text("")
    return urls, full, counts, runs


def loader(dataset, **kwargs):
    return ringloader.DataLoader(dataset, batch_size=4, shuffle=True, num_workers=2, seed=3,
                                 **kwargs)


def test_counts_start_at_once_and_give_the_full_indexs_epochs(counted):
    urls, full, counts, runs = counted
    fast = ringloader.datasets.TarShards(urls, PIPELINE, shuffle_buffer=4, index=counts)
    assert runs.read_text() == ""  # nothing streamed to construct it
    slow = ringloader.datasets.TarShards(urls, PIPELINE, shuffle_buffer=4, index=full)
    assert fast.counts_only and not slow.counts_only
    assert (len(fast), fast.shard_sizes, fast.urls) == (len(slow), slow.shard_sizes, slow.urls)
    for epoch in range(2):
        a, b = loader(fast), loader(slow)
        a.set_epoch(epoch)
        b.set_epoch(epoch)
        got, want = batches(a), batches(b)
        assert len(got) == len(want) == 6
        for (x, y), (wx, wy) in zip(got, want):
            assert torch.equal(y, wy) and torch.equal(x, wx)
    # Inspected in Python: the same sample, its label read from the shard.
    exact = T.Compose([T.CenterCrop(8), T.ToTensor()])
    image, label = ringloader.datasets.TarShards(urls, exact, index=counts)[7]
    want_image, want_label = ringloader.datasets.TarShards(urls, exact, index=full)[7]
    assert label == want_label and torch.equal(image, want_image)
    assert fast.member_name(7) == f"{fast.urls[1]} sample 2"
    assert fast.member_name(-1) == f"{fast.urls[4]} sample 0"


def test_a_stopped_epoch_resumes_as_the_full_index_would(counted):
    urls, full, counts, _ = counted
    fast = ringloader.datasets.TarShards(urls, PIPELINE, shuffle_buffer=4, index=counts)
    slow = ringloader.datasets.TarShards(urls, PIPELINE, shuffle_buffer=4, index=full)
    want = batches(loader(slow))
    first = loader(fast)
    iterator = iter(first)
    seen = [tuple(t.clone() for t in next(iterator)) for _ in range(2)]
    state = first.state_dict()
    del iterator, first
    second = loader(fast)
    second.load_state_dict(state)
    seen += batches(second)
    assert len(seen) == len(want)
    for (x, y), (wx, wy) in zip(seen, want):
        assert torch.equal(y, wy) and torch.equal(x, wx)


def test_a_mix_of_counted_shards_reads_each_part_as_the_full_index(counted):
    urls, full, counts, _ = counted
    parts = [ringloader.datasets.TarShards(urls, PIPELINE, index=index) for index in (counts, full)]
    mix = ringloader.datasets.Mix([(parts[0], 1.0), (parts[1], 1.0)], epoch_size=12)
    same = ringloader.datasets.Mix([(ringloader.datasets.TarShards(urls, PIPELINE, index=full), 1.0),
                                    (parts[1], 1.0)], epoch_size=12)
    got, want = batches(loader(mix)), batches(loader(same))
    assert len(got) == len(want) == 3
    for (x, y), (wx, wy) in zip(got, want):
        assert torch.equal(y, wy) and torch.equal(x, wx)


def test_labels_up_front_say_how_to_write_the_full_index(counted):
    urls, _, counts, _ = counted
    dataset = ringloader.datasets.TarShards(urls, PIPELINE, index=counts)
    assert len(dataset.targets) == 21
    with pytest.raises(ringloader.OptionError,
                       match=rf"needs a full shard index: {counts} counts samples only .*"
                             r"`ringloader-shard --index-only INDEX\.json URL\.\.\.`"):
        list(dataset.targets)
    with pytest.raises(ringloader.OptionError, match="holds sample counts only .* shard cache"):
        ringloader.datasets.TarShards(urls, PIPELINE, index=counts,
                                      cache_dir=str(counted[3]) + ".cache")


def test_a_count_the_shard_does_not_match_is_a_named_stale_index(counted, tmp_path):
    urls, _, counts, _ = counted
    with open(counts) as f:
        wids = json.load(f)
    wids["shardlist"][2]["nsamples"] = 6  # the shard holds 5
    stale = str(tmp_path / "stale.json")
    with open(stale, "w") as f:
        json.dump(wids, f)
    dataset = ringloader.datasets.TarShards(urls, PIPELINE, index=stale)
    # The long pipe: command is named twice; the middle of the message is
    # elided to fit the slot's error record, never its reason.
    with pytest.raises(ringloader.DataIOError,
                       match=r"sample 15 \(pipe:echo .*shard-002\.tar: stale index "
                             rf"{re.escape(stale)}: it counts 6 samples, the shard holds 5"):
        batches(ringloader.DataLoader(dataset, batch_size=4, num_workers=2))
