# SPDX-License-Identifier: BSD-3-Clause
"""torch's DataLoader semantics on the Python-dataset path, each checked by
running torch's loader beside ringloader's on the same dataset."""
import collections
import os

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader as TorchLoader
from torch.utils.data import default_collate

import ringloader

Point = collections.namedtuple("Point", ["x", "y"])


class Structured(torch.utils.data.Dataset):
    """Every leaf type default_collate handles, nested."""

    def __init__(self, n=13):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {
            "image": torch.full((2, 3), float(i)),
            "array": np.arange(4, dtype=np.int16) + i,
            "np_scalar": np.float32(i / 4),
            "label": i % 3, "score": i / 8, "flag": i % 2 == 0,
            "name": f"item-{i}" * (1 + i % 3), "raw": bytes([i]),
            "point": Point(torch.tensor([i, -i]), i * 10),
            "pair": (i, f"p{i}"), "nested": [{"deep": np.float64(i)}, [i, i + 1]],
        }


class WithNone(Structured):
    def __getitem__(self, i):
        return torch.tensor([i]), None


class Ragged(Structured):
    """Sequences of varying length: shorter and longer than sample 0's."""

    def __getitem__(self, i):
        return torch.arange(3 + (i * 7) % 11, dtype=torch.float32), i


class LongText(Structured):
    def __getitem__(self, i):
        return torch.tensor(i), "x" * (40_000 if i == 5 else 10)


class RecordMissing(Exception):
    pass


class NeedsTwoArguments(Exception):
    def __init__(self, what, where):
        super().__init__(f"{what} at {where}")


class Raises(Structured):
    def __init__(self, error, arguments, n=16):
        super().__init__(n)
        self.error, self.arguments = error, arguments

    def __getitem__(self, i):
        if i == 11:
            raise self.error(*self.arguments)
        return torch.tensor(i)


class Labelled(Structured):
    def __getitem__(self, i):
        return torch.full((64, 64), float(i)), i % 7, f"id{i}"


def assert_same(ours, theirs, where="batch"):
    """Equal values and equal structure types (namedtuple, dict, list)."""
    assert type(ours) is type(theirs), f"{where}: {type(ours)} != {type(theirs)}"
    if isinstance(theirs, torch.Tensor):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        assert torch.equal(ours, theirs), where
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs), where
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, where


def close(torch_iterator):
    """Stops torch's workers of an iterator left mid-epoch now (otherwise
    its garbage collection waits seconds for them, in some later test)."""
    getattr(torch_iterator, "_shutdown_workers", lambda: None)()


def both(dataset, **kwargs):
    kwargs.setdefault("num_workers", 2)
    return (ringloader.DataLoader(dataset, **kwargs), TorchLoader(dataset, **kwargs))


# -- errors -------------------------------------------------------------------

def test_every_error_is_a_ringloader_error_and_keeps_its_builtin_base():
    pairs = {ringloader.OptionError: ValueError, ringloader.DecodeError: ValueError,
             ringloader.DataIOError: OSError, ringloader.WorkerError: RuntimeError,
             ringloader.LeaseError: RuntimeError}
    for cls, builtin in pairs.items():
        assert issubclass(cls, ringloader.Error) and issubclass(cls, builtin), cls
    assert not issubclass(ringloader.OptionError, RuntimeError)


def test_errors_raised_from_cpp_are_caught_by_both_bases(tmp_path):
    # torch(vision) raises an OSError for a missing folder; so do we, and
    # the same error is a ringloader.Error.
    with pytest.raises(OSError):
        ringloader.datasets.ImageFolder(str(tmp_path / "missing"))
    with pytest.raises(ringloader.Error) as info:
        ringloader.datasets.ImageFolder(str(tmp_path / "missing"))
    assert isinstance(info.value, ringloader.DataIOError)
    with pytest.raises(ValueError):  # torch: ValueError for a bad option
        TorchLoader(Structured(), batch_size=2, sampler=[0], shuffle=True)
    with pytest.raises(ringloader.Error):
        ringloader.DataLoader(Structured(), batch_size=2, sampler=[0], shuffle=True)


def test_nested_error_messages_have_one_prefix(tmp_path):
    from conftest import write_image_folder
    root = write_image_folder(str(tmp_path / "images"), classes=1, per_class=4)
    with open(os.path.join(root, "class_0", "002.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n not really a png")
    loader = ringloader.DataLoader(
        ringloader.datasets.ImageFolder(root, transform=ringloader.transforms.Compose([
            ringloader.transforms.Resize((8, 8)), ringloader.transforms.ToTensor()])),
        batch_size=4, num_workers=1)
    with pytest.raises(ringloader.Error) as info:
        list(loader)
    message = str(info.value)
    assert message.startswith("ringloader: ") and message.count("ringloader: ") == 1, message
    assert "sample 2" in message and "batch 0" in message
    assert isinstance(info.value, ringloader.DecodeError) and isinstance(info.value, ValueError)


# -- sample structures ----------------------------------------------------------

def test_structures_collate_like_torch():
    ours, theirs = both(Structured(), batch_size=4)
    got, want = list(ours), list(theirs)
    assert len(got) == len(want) == 4
    for i, (a, b) in enumerate(zip(got, want)):
        assert_same(a, b, f"batch {i}")
    assert isinstance(got[0]["point"], Point)


def test_structures_reach_a_custom_collate_as_the_dataset_returned_them():
    ours, theirs = both(Structured(7), batch_size=3, collate_fn=lambda samples: samples)
    for a, b in zip(ours, theirs):
        for sa, sb in zip(a, b):
            assert_same({k: v for k, v in sa.items() if k not in ("array", "nested")},
                        {k: v for k, v in sb.items() if k not in ("array", "nested")})
            assert np.array_equal(sa["array"], sb["array"])
            assert sa["array"].dtype == sb["array"].dtype
            assert type(sa["np_scalar"]) is type(sb["np_scalar"])


def test_none_fails_default_collate_as_torch_and_passes_a_custom_one():
    ours, theirs = both(WithNone(6), batch_size=3)
    with pytest.raises(TypeError) as want:
        next(iterator := iter(theirs))
    close(iterator)
    with pytest.raises(TypeError) as got:
        next(iter(ours))
    assert "NoneType" in str(want.value) and "NoneType" in str(got.value)

    def keep_none(samples):
        return torch.cat([x for x, _ in samples]), [extra for _, extra in samples]
    ours, theirs = both(WithNone(6), batch_size=3, collate_fn=keep_none)
    for a, b in zip(ours, theirs):
        assert_same(a, b)


def pad(samples):
    sequences, labels = zip(*samples)
    return pad_sequence(sequences, batch_first=True), torch.tensor(labels)


def test_samples_of_varying_size_work_with_a_padding_collate():
    ours, theirs = both(Ragged(12), batch_size=4, collate_fn=pad)
    got, want = list(ours), list(theirs)
    assert len(got) == 3 and [b[0].shape[1] for b in got] == [b[0].shape[1] for b in want]
    for a, b in zip(got, want):
        assert_same(a, b)


def test_varying_size_with_default_collate_fails_like_torch_naming_the_sample():
    ours, theirs = both(Ragged(8), batch_size=4)
    with pytest.raises(RuntimeError):
        next(iterator := iter(theirs))
    close(iterator)
    with pytest.raises(RuntimeError, match="sample 1") as info:
        next(iter(ours))
    assert isinstance(info.value, ringloader.Error) and "collate_fn" in str(info.value)


def test_pickled_fields_over_the_per_sample_bound_need_no_option():
    """A sample whose pickled fields outgrow the bound sized from sample 0
    sends its batch down the encoded path (the worker collates it): the
    batches are torch's, with or without max_pickled_bytes."""
    theirs = list(TorchLoader(LongText(8), batch_size=4, num_workers=2))
    for extra in ({}, {"max_pickled_bytes": 64_000}):
        ours = ringloader.DataLoader(LongText(8), batch_size=4, num_workers=2, **extra)
        got = list(ours)
        assert len(got) == len(theirs)
        for a, b in zip(got, theirs):
            assert_same(a, b)


# -- holding batches ----------------------------------------------------------

def test_kept_labels_and_strings_never_hold_a_slot():
    kwargs = dict(batch_size=2, num_workers=2)
    ours = ringloader.DataLoader(Labelled(24), ring_slots=2, **kwargs)
    theirs = TorchLoader(Labelled(24), **kwargs)
    kept = [(y, names) for _, y, names in ours]  # 12 batches through 2 slots
    want = [(y, names) for _, y, names in theirs]
    assert len(kept) == 12
    assert_same(kept, want)


# -- iteration ------------------------------------------------------------------

def test_second_iter_restarts_the_epoch_like_torch():
    ours, theirs = both(Structured(10), batch_size=3)
    runs, firsts = [], []
    for loader in (ours, theirs):
        firsts.append(iter(loader))
        next(firsts[-1])
        second = iter(loader)
        assert second is not firsts[-1]
        runs.append([b["label"] for b in second])
    assert_same(runs[0], runs[1])
    close(firsts[1])
    with pytest.raises(ringloader.Error, match="superseded"):
        next(firsts[0])  # ours: one ring, one stream (torch would go on)


def test_persistent_workers_hand_out_one_iterator_like_torch():
    ours, theirs = both(Structured(10), batch_size=3, persistent_workers=True)
    for loader in (ours, theirs):
        first = iter(loader)
        next(first)
        assert iter(loader) is first
    assert_same([b["label"] for b in ours], [b["label"] for b in theirs])


def test_next_after_the_end_keeps_raising_stop_iteration_and_len_works():
    ours, theirs = both(Structured(7), batch_size=3)
    for loader in (ours, theirs):
        iterator = iter(loader)
        assert len(iterator) == 3
        assert len(list(iterator)) == 3
        for _ in range(3):
            with pytest.raises(StopIteration):
                next(iterator)
    assert_same([b["label"] for b in ours], [b["label"] for b in theirs])


def test_is_a_torch_dataloader_with_the_attributes_frameworks_read():
    dataset = Structured(9)
    kwargs = dict(batch_size=4, num_workers=2, drop_last=True)
    ours, theirs = ringloader.DataLoader(dataset, **kwargs), TorchLoader(dataset, **kwargs)
    assert isinstance(ours, TorchLoader)
    for name in ("dataset", "batch_size", "num_workers", "collate_fn", "drop_last",
                 "pin_memory", "timeout", "worker_init_fn", "multiprocessing_context",
                 "persistent_workers"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.collate_fn is default_collate
    assert type(ours.sampler) is type(theirs.sampler)
    assert type(ours.batch_sampler) is type(theirs.batch_sampler)
    assert list(ours.batch_sampler) == list(theirs.batch_sampler)
    assert len(ours) == len(theirs) == 2
    assert_same([b["label"] for b in ours], [b["label"] for b in theirs])


# -- exceptions from __getitem__ ---------------------------------------------

@pytest.mark.parametrize("error, arguments", [
    (KeyError, ("no such record in /data/records.db",)),
    (RecordMissing, ("record 11 is gone",)),
    (NeedsTwoArguments, ("record", "/data/records.db"))])
def test_getitem_exception_reaches_the_trainer_with_its_type(error, arguments):
    ours, theirs = both(Raises(error, arguments), batch_size=4)
    with pytest.raises(Exception) as want:
        list(iterator := iter(theirs))
    close(iterator)
    with pytest.raises(Exception) as got:
        list(ours)
    if error is NeedsTwoArguments:  # cannot be rebuilt from a message
        assert type(want.value) is RuntimeError
        assert isinstance(got.value, RuntimeError)
    else:
        assert type(got.value) is type(want.value) is error
    message = str(got.value)
    assert str(error(*arguments)).strip("'") in message and "sample 11" in message
    assert "Caught" in message and "Original Traceback" in message
    assert "__getitem__" in message  # the worker's traceback


# -- custom batch samplers ----------------------------------------------------

class GroupedBatchSampler(torch.utils.data.BatchSampler):
    """Batches of one group (index % 3) each, so some are short."""

    def __iter__(self):
        groups = {}
        for index in self.sampler:
            group = groups.setdefault(index % 3, [])
            group.append(index)
            if len(group) == self.batch_size:
                yield groups.pop(index % 3)
        yield from (group for group in groups.values() if group)

    def __len__(self):
        return sum(-(-len(range(g, len(self.sampler), 3)) // self.batch_size)
                   for g in range(3))


@pytest.mark.parametrize("workers", [0, 2])
def test_custom_batch_sampler_keeps_its_own_batches_like_torch(workers):
    dataset = Structured(17)
    sampler = GroupedBatchSampler(torch.utils.data.SequentialSampler(dataset), 4, False)
    ours = ringloader.DataLoader(dataset, batch_sampler=sampler, num_workers=workers)
    theirs = TorchLoader(dataset, batch_sampler=sampler, num_workers=workers)
    got, want = list(ours), list(theirs)
    assert [len(b["label"]) for b in want] == [4, 4, 4, 2, 2, 1]
    assert len(ours) == len(theirs) == len(got) == len(want)
    for a, b in zip(got, want):
        assert_same(a, b)


def test_custom_batch_sampler_on_a_native_dataset(tmp_path):
    import torchvision
    from conftest import write_image_folder
    root = write_image_folder(str(tmp_path / "images"), classes=3, per_class=5)
    sampler = GroupedBatchSampler(torch.utils.data.SequentialSampler(range(15)), 4, False)
    ours = ringloader.DataLoader(
        ringloader.datasets.ImageFolder(root, transform=ringloader.transforms.Compose([
            ringloader.transforms.Resize((8, 8)), ringloader.transforms.ToTensor()])),
        batch_sampler=sampler, num_workers=2)
    theirs = TorchLoader(
        torchvision.datasets.ImageFolder(root, transform=torchvision.transforms.Compose([
            torchvision.transforms.Resize((8, 8)), torchvision.transforms.ToTensor()])),
        batch_sampler=sampler, num_workers=2)
    got, want = list(ours), list(theirs)
    assert len(got) == len(want) and len(got) > 3
    for (x, y), (tx, ty) in zip(got, want):
        assert x.shape == tx.shape and torch.equal(y, ty)


# -- samplers with no end -------------------------------------------------------

class Endless(torch.utils.data.Sampler):
    """An endless generator of indices, with no len (as streaming samplers are)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        step = 0
        while True:
            yield (step * 7) % self.n
            step += 1


class Finite(Endless):
    """A sampler with no len that ends: 2 * n + 1 indices."""

    def __iter__(self):
        for _, index in zip(range(2 * self.n + 1), super().__iter__()):
            yield index


class Small(Structured):
    def __getitem__(self, i):
        return i, torch.tensor([i, i * i])


@pytest.mark.parametrize("workers", [0, 2])
def test_an_endless_sampler_is_streamed_across_chunks(workers):
    import itertools
    from ringloader._trainer import stream as _stream
    batches = _stream.CHUNK_BATCHES + 5  # past the first chunk
    ours, theirs = both(Small(11), batch_size=2, sampler=Endless(11), num_workers=workers)
    got = list(itertools.islice(ours, batches))
    want = list(itertools.islice(iterator := iter(theirs), batches))
    close(iterator)
    assert len(got) == batches
    assert_same(got, want)
    with pytest.raises(TypeError):
        len(ours)  # as torch: a sampler with no len gives a loader with none


@pytest.mark.parametrize("drop_last", [False, True])
def test_a_sampler_with_no_len_that_ends_gives_torchs_epoch(drop_last):
    ours, theirs = both(Small(11), batch_size=4, sampler=Finite(11), drop_last=drop_last)
    got, want = list(ours), list(theirs)
    assert len(got) == (5 if drop_last else 6)
    assert_same(got, want)
    assert_same(list(ours), want)  # and again, next epoch


class _Numbers(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, index):
        return torch.tensor([index])


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("kind", ["python", "native"])
def test_global_rng_after_iteration_is_torchs(tmp_path, kind, shuffle, workers):
    """Code that draws after iter() or after the loop (a script's
    get_y_neg, a model built later) sees torch's random state: the iterator
    draws its base seed at iter() even with num_workers=0, then the sampler
    its own seed."""
    import torchvision
    if kind == "python":
        dataset = _Numbers()
    else:
        from conftest import write_image_folder
        import torchvision.transforms as T
        root = write_image_folder(str(tmp_path / "images"), classes=2, per_class=5)
        dataset = torchvision.datasets.ImageFolder(
            root, T.Compose([T.Resize([8, 8]), T.ToTensor()]))
    draws = []
    for make in (torch.utils.data.DataLoader, ringloader.DataLoader):
        torch.manual_seed(0)
        loader = make(dataset, batch_size=5, shuffle=shuffle, num_workers=workers)
        first = next(iter(loader))[0].clone()
        after_iter = torch.rand(1).item()
        batches = [batch[0].clone() for batch in loader]
        draws.append((first, after_iter, batches, torch.rand(1).item()))
    (first_t, iter_t, batches_t, end_t), (first_r, iter_r, batches_r, end_r) = draws
    assert iter_r == iter_t and end_r == end_t
    assert torch.equal(first_r, first_t)
    assert all(torch.equal(a, b) for a, b in zip(batches_r, batches_t))
