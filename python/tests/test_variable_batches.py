# SPDX-License-Identifier: BSD-3-Clause
"""Drop-in round 3: samples of any size with no byte budget, collate_fn in
the workers, batch_size=None, and a persistent iterator's seed; each case
checked batch for batch against torch's DataLoader on the same dataset."""
import os

import pytest
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import BatchSampler, SequentialSampler
from torch.utils.data import DataLoader as TorchLoader

import ringloader
from test_torch_semantics import assert_same, close


class Photos(torch.utils.data.Dataset):
    """Images of many sizes (as evaluation at native aspect gives)."""

    def __init__(self, n=12):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        h, w = 20 + (i * 37) % 90, 24 + (i * 53) % 120
        return torch.randint(0, 255, (3, h, w), dtype=torch.uint8, generator=g), i % 5


class Detection(Photos):
    """torchvision's references/detection sample: an image of any size and
    a dict target with a variable number of boxes."""

    def __getitem__(self, i):
        image, _ = super().__getitem__(i)
        boxes = torch.rand(i % 4, 4, generator=torch.Generator().manual_seed(i)) * 20
        return image.float() / 255, {"boxes": boxes, "labels": torch.arange(i % 4),
                                     "image_id": i}


class Tokens(Photos):
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        length = 5 + int(torch.randint(0, 296, (), generator=g))
        return torch.randint(0, 30000, (length,), generator=g), i % 2


def detection_collate(batch):
    return tuple(zip(*batch))


def pad_tokens(batch):
    sequences, labels = zip(*batch)
    return pad_sequence(sequences, batch_first=True), torch.tensor(labels)


def both(dataset, **kwargs):
    kwargs.setdefault("num_workers", 2)
    return ringloader.DataLoader(dataset, **kwargs), TorchLoader(dataset, **kwargs)


def same_epochs(ours, theirs, epochs=1):
    for epoch in range(epochs):
        got, want = list(ours), list(theirs)
        assert len(got) == len(want), f"epoch {epoch}"
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same(a, b, f"epoch {epoch} batch {i}")


@pytest.mark.parametrize("workers", [0, 2])
def test_images_of_native_size_at_batch_size_1(workers):
    same_epochs(*both(Photos(10), batch_size=1, num_workers=workers))


def test_unequal_images_fail_default_collate_with_torchs_error():
    ours, theirs = both(Photos(8), batch_size=4)
    with pytest.raises(RuntimeError) as want:
        next(iterator := iter(theirs))
    close(iterator)
    with pytest.raises(RuntimeError) as got:
        next(iter(ours))
    assert "stack expects each tensor to be equal size" in str(want.value)
    assert "stack expects each tensor to be equal size" in str(got.value)


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_detection_batches_with_a_zip_collate(workers):
    same_epochs(*both(Detection(11), batch_size=2, num_workers=workers,
                      collate_fn=detection_collate), epochs=2)


def test_token_sequences_with_a_padding_collate_and_at_batch_size_1():
    same_epochs(*both(Tokens(40), batch_size=8, collate_fn=pad_tokens))
    same_epochs(*both(Tokens(9), batch_size=1))


def _collated_in(batch):
    return {"pid": os.getpid(), "rng": torch.rand(2), "n": len(batch)}


def test_collate_fn_runs_in_the_workers_as_torchs_does():
    loader = ringloader.DataLoader(Tokens(12), batch_size=3, num_workers=2,
                                   collate_fn=_collated_in)
    batches = list(loader)
    assert [b["n"] for b in batches] == [3] * 4
    pids = {b["pid"] for b in batches}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    # Its random draws come from the worker, keyed per batch: the same
    # bytes on every run, whatever worker made the batch.
    again = list(ringloader.DataLoader(Tokens(12), batch_size=3, num_workers=1,
                                       collate_fn=_collated_in))
    assert all(torch.equal(a["rng"], b["rng"]) for a, b in zip(batches, again))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("collate", [None, detection_collate])
def test_batch_size_none_hands_out_samples_as_torch(workers, collate):
    ours, theirs = both(Detection(7), batch_size=None, num_workers=workers,
                        collate_fn=collate)
    assert ours.batch_size is theirs.batch_size is None
    assert ours.batch_sampler is theirs.batch_sampler is None
    assert ours.collate_fn is theirs.collate_fn
    assert len(ours) == len(theirs) == 7
    same_epochs(ours, theirs)


def test_batch_size_none_with_drop_last_is_refused_as_torch():
    with pytest.raises(ValueError, match="mutually exclusive with drop_last"):
        TorchLoader(Photos(4), batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="mutually exclusive with drop_last"):
        ringloader.DataLoader(Photos(4), batch_size=None, drop_last=True)


class ShortBatches(BatchSampler):
    """Batches of 1 to 3 samples (a custom batch sampler, as detection's
    GroupedBatchSampler)."""

    def __init__(self, n):
        super().__init__(SequentialSampler(range(n)), 3, False)
        self.n = n

    def __iter__(self):
        i, size = 0, 1
        while i < self.n:
            yield list(range(i, min(self.n, i + size)))
            i, size = i + size, size % 3 + 1

    def __len__(self):
        return len(list(iter(self)))


class Counted(Detection):
    def __getitem__(self, i):
        with open(self.log, "a") as log:
            log.write(f"{i}\n")
        return super().__getitem__(i)


def test_a_custom_batch_samplers_short_batches_reach_the_workers_collate(tmp_path):
    dataset = Counted(13)
    dataset.log = str(tmp_path / "calls")
    ours = ringloader.DataLoader(dataset, batch_sampler=ShortBatches(13), num_workers=2,
                                 collate_fn=detection_collate)
    theirs = TorchLoader(dataset, batch_sampler=ShortBatches(13), num_workers=2,
                         collate_fn=detection_collate)
    os.remove(dataset.log) if os.path.exists(dataset.log) else None
    got = list(ours)
    # Padding makes no sample: every index once (workers probe sample 0 at
    # construction, before the log was cleared).
    with open(dataset.log) as log:
        assert sorted(int(line) for line in log) == list(range(13))
    want = list(theirs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert_same(a, b)


def test_kept_variable_batches_spill_and_stay_valid():
    ours = ringloader.DataLoader(Photos(16), batch_size=1, num_workers=2, ring_slots=2)
    got = list(ours)  # 16 batches through 2 slots
    want = list(TorchLoader(Photos(16), batch_size=1))
    # (Images up to 4 KiB are copied out of the slot: they hold none.)
    assert ours.stats()["spilled_batches"] >= 8
    for a, b in zip(got, want):
        assert_same(a, b)


class Big(torch.utils.data.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return torch.full((1 << 20 if i == 4 else 16,), float(i))  # 4 MiB vs 64 B


def test_slots_grow_as_written_and_the_cap_names_samples_and_size():
    loader = ringloader.DataLoader(Big(), batch_size=2, num_workers=1,
                                   collate_fn=lambda b: torch.cat(b), ring_slots=2)
    out = [b.clone() for b in loader]
    assert out[2].numel() == (1 << 20) + 16
    stats = loader.stats()
    # Virtual slots (1 GiB each) commit only what batches wrote.
    assert stats["ring_bytes"] >= 2 << 30
    assert (4 << 20) <= stats["ring_resident_bytes"] < (64 << 20), stats
    capped = ringloader.DataLoader(Big(), batch_size=2, num_workers=1,
                                   collate_fn=lambda b: torch.cat(b),
                                   max_batch_bytes=1 << 20)
    with pytest.raises(ringloader.OptionError) as info:
        list(capped)
    message = str(info.value)
    assert "[4, 5]" in message and "max_batch_bytes" in message and "4194" in message


@pytest.mark.parametrize("generator", [False, True])
def test_persistent_workers_shuffle_like_torch_over_epochs(generator):
    def make(cls):
        g = torch.Generator().manual_seed(5) if generator else None
        torch.manual_seed(3)
        return cls(Tokens(38), batch_size=1, shuffle=True, num_workers=2,
                   persistent_workers=True, generator=g,
                   collate_fn=lambda b: b[0][1] * 0 + b[0][0].numel())
    ours, theirs = make(ringloader.DataLoader), make(TorchLoader)
    for epoch in range(2):
        torch.manual_seed(10 + epoch)
        got = [int(b) for b in ours]
        torch.manual_seed(10 + epoch)
        want = [int(b) for b in theirs]
        assert got == want, f"epoch {epoch}"


def test_resume_mid_epoch_with_a_collate_in_the_workers():
    kwargs = dict(batch_size=3, num_workers=2, collate_fn=pad_tokens)
    first = ringloader.DataLoader(Tokens(20), **kwargs)
    iterator = iter(first)
    head = [next(iterator) for _ in range(2)]
    state = first.state_dict()
    resumed = ringloader.DataLoader(Tokens(20), **kwargs)
    resumed.load_state_dict(state)
    rest = list(resumed)
    want = list(TorchLoader(Tokens(20), batch_size=3, collate_fn=pad_tokens))
    for a, b in zip(head + rest, want):
        assert_same(a, b)
    assert len(head + rest) == len(want)


class OneBigBatch(torch.utils.data.Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        return torch.full((4 << 20 if i == 2 else 64,), float(i))  # 16 MiB once


def test_a_slot_gives_back_the_pages_of_an_earlier_large_batch():
    loader = ringloader.DataLoader(OneBigBatch(), batch_size=1, num_workers=1,
                                   collate_fn=lambda b: b[0], ring_slots=2)
    seen = []
    for batch in loader:
        seen.append(loader.stats()["ring_resident_bytes"])
        del batch
    # The 16 MiB batch committed its pages; the next batch in its slot
    # gave them back.
    assert max(seen) >= 16 << 20 and seen[-1] < 4 << 20, seen


def test_a_collate_fn_that_cannot_be_pickled_runs_in_the_trainer_said_once():
    import threading
    lock = threading.Lock()  # cannot be pickled: torch's forked workers never try

    def locked_pad(batch):
        with lock:
            return pad_tokens(batch)
    with pytest.warns(UserWarning, match="cannot be pickled"):
        ours = ringloader.DataLoader(Tokens(20), batch_size=4, num_workers=2,
                                     collate_fn=locked_pad)
    same_epochs(ours, TorchLoader(Tokens(20), batch_size=4, num_workers=2,
                                  collate_fn=locked_pad))
