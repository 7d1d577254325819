# SPDX-License-Identifier: BSD-3-Clause
"""TensorDataset (and Subset / ConcatDataset of it): batches are torch's
DataLoader's, batch for batch (dtypes, shapes, values, labels), whether the
C++ workers copy its rows (one tensor, or features and int64 labels:
_native/rows.py, test_native_rows.py) or Python workers gather each batch
by index (three tensors here, and _tensor_rows.py's own tests)."""
import pytest
import torch
from torch.utils.data import ConcatDataset, Subset, TensorDataset, random_split

import ringloader
from ringloader._slots.batch_structure import BatchStructure
from ringloader._slots.tensor_rows import rows_of


def tensors(count, n, seed):
    generator = torch.Generator().manual_seed(seed)
    made = [torch.randn(n, 3, 4, generator=generator),
            torch.randint(0, 10, (n,), generator=generator),
            torch.randint(0, 255, (n, 5), generator=generator).to(torch.uint8)]
    return made[:count]


def assert_same_batches(dataset, **options):
    ours = ringloader.DataLoader(dataset, num_workers=2, **options)
    generator = options.pop("generator", None)
    if generator is not None:  # the same order: a generator in the same state
        options["generator"] = torch.Generator().manual_seed(generator.initial_seed())
    theirs = torch.utils.data.DataLoader(dataset, **options)
    count = 0
    for mine, torchs in zip(ours, theirs):
        assert isinstance(mine, list) and len(mine) == len(torchs)
        for a, b in zip(mine, torchs):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.equal(a, b)
        count += 1
    assert count == len(theirs) == len(ours)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_tensor_dataset_batches_are_torchs(count):
    assert_same_batches(TensorDataset(*tensors(count, 203, count)), batch_size=16)


def test_shuffled_with_a_short_last_batch_and_drop_last():
    dataset = TensorDataset(*tensors(2, 101, 4))
    assert_same_batches(dataset, batch_size=8, shuffle=True,
                        generator=torch.Generator().manual_seed(6))
    assert_same_batches(dataset, batch_size=8, drop_last=True)


def test_subset_and_random_split():
    dataset = TensorDataset(*tensors(3, 150, 5))
    train, val = random_split(dataset, [100, 50], generator=torch.Generator().manual_seed(0))
    assert_same_batches(train, batch_size=12, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    assert_same_batches(val, batch_size=7)
    assert_same_batches(Subset(train, list(range(90, 10, -3))), batch_size=5)


def test_concat_of_tensor_datasets_and_subsets():
    a, b = TensorDataset(*tensors(2, 70, 6)), TensorDataset(*tensors(2, 45, 7))
    assert_same_batches(ConcatDataset([a, b]), batch_size=16, shuffle=True,
                        generator=torch.Generator().manual_seed(2))
    mixed = ConcatDataset([Subset(a, [5, 3, 60, 1]), b, Subset(ConcatDataset([b, a]), [0, 100, 44])])
    assert_same_batches(mixed, batch_size=3)
    assert_same_batches(Subset(mixed, [10, 0, 50, 3]), batch_size=2)
    assert_same_batches(Subset(mixed, [-1, 0, -50, 3, -7]), batch_size=2)


def test_which_datasets_are_gathered():
    a = TensorDataset(*tensors(2, 20, 8))
    # Negative Subset indices read as torch's t[i] (the trainer's native
    # rows read them so too).
    gathered = [a, Subset(a, [1, 2]), ConcatDataset([a, Subset(a, [3])]), Subset(a, [-1, -20])]
    for dataset in gathered:
        assert rows_of(dataset, BatchStructure(dataset[0])) is not None

    class Noisy(TensorDataset):  # a user dataset: its own __getitem__ runs
        def __getitem__(self, i):
            return self.tensors[0][i] + torch.rand(()), self.tensors[1][i]

    other = TensorDataset(torch.zeros(20, 3, 4, dtype=torch.float64), a.tensors[1])
    sparse = TensorDataset(a.tensors[0].to_sparse(), a.tensors[1])
    kept = [Noisy(*a.tensors), ConcatDataset([a, other]), Subset(a, [-21]), Subset(a, [20]),
            ConcatDataset([a, Noisy(*a.tensors)]), sparse]
    for dataset in kept:
        assert rows_of(dataset, BatchStructure(a[0])) is None


def test_a_batch_that_cannot_be_gathered_runs_sample_by_sample():
    """The trainer rejects orders outside the dataset, so a bad index only
    reaches the gather from a dataset that changed under it; the worker then
    runs the batch per sample (_gathered is False) and that path raises."""
    from ringloader._workers.worker import _gathered

    class Writer:
        regions = [torch.empty(4, 3, 4), torch.empty(4, dtype=torch.int64)]
    a = TensorDataset(*tensors(2, 10, 9))
    beats = []
    for dataset in (a, Subset(a, [1, 2, 3]), ConcatDataset([a, a])):
        rows = rows_of(dataset, BatchStructure(a[0]))
        for samples in ([0, len(dataset)], [1, -1]):
            assert not _gathered(rows, Writer, samples, beats.append)
        assert _gathered(rows, Writer, [2, 0], beats.append)
        assert torch.equal(Writer.regions[0][:2], torch.stack([dataset[2][0], dataset[0][0]]))
    assert beats[:3] == [0, 1, 2]  # the batch's first sample
