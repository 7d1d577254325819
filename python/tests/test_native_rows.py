# SPDX-License-Identifier: BSD-3-Clause
"""TensorDataset (and Subset / ConcatDataset of it) runs in the C++ workers
(_native/rows.py, loader/data/tables/tensor_rows.h): no Python worker process,
and batches equal torch's DataLoader's (list vs tuple, dtypes, shapes,
values) for every way of ordering and batching them; what cannot go native
keeps the Python workers and says why."""
import os

import pytest
import torch
from torch.utils.data import (ConcatDataset, Subset, SubsetRandomSampler, TensorDataset,
                              WeightedRandomSampler, random_split)

import ringloader
from ringloader._native.rows import ConvertedRows


def features_and_labels(n, seed, shape=(3, 4), dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(n, *shape, generator=generator)
    if dtype is torch.bool:
        features = features > 0
    elif not dtype.is_floating_point:
        features = (features * 50).to(dtype)
    else:
        features = features.to(dtype)
    return features, torch.randint(0, 1000, (n,), generator=generator)


def same_as_torch(dataset, num_workers=2, **options):
    """Loads `dataset` with ours and torch's (a generator or sampler given
    as a factory, so both start from the same state), asserts the batches
    are equal, and returns our loader."""
    make = {key: value for key, value in options.items() if callable(value)}
    ours = ringloader.DataLoader(dataset, num_workers=num_workers,
                                 **{**options, **{k: f() for k, f in make.items()}})
    theirs = torch.utils.data.DataLoader(dataset,
                                         **{**options, **{k: f() for k, f in make.items()}})
    mine = list(ours)  # kept batches: their slots spill, views follow
    reference = list(theirs)
    assert len(mine) == len(reference) == len(ours)
    for a, b in zip(mine, reference):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert type(x) is type(y)
            assert x.dtype == y.dtype and x.shape == y.shape
            assert torch.equal(x, y)
    return ours


def worker_executables(loader):
    return {os.path.basename(os.readlink(f"/proc/{pid}/exe")) for pid in loader.worker_pids()}


@pytest.mark.parametrize("num_workers", [0, 2])
def test_native_and_equal_to_torch_in_order_and_shuffled(num_workers):
    dataset = TensorDataset(*features_and_labels(203, 1))
    ours = same_as_torch(dataset, num_workers, batch_size=16)
    assert isinstance(ours._converted, ConvertedRows)
    same_as_torch(dataset, num_workers, batch_size=16, shuffle=True,
                  generator=lambda: torch.Generator().manual_seed(5))
    same_as_torch(dataset, num_workers, batch_size=16, drop_last=True)


def test_no_python_worker_runs_a_native_tensor_dataset():
    dataset = TensorDataset(*features_and_labels(100, 2))
    ours = ringloader.DataLoader(dataset, batch_size=10, num_workers=2)
    assert isinstance(ours._converted, ConvertedRows)
    next(iter(ours))
    assert worker_executables(ours) == {"ringloader-worker"}
    # The Python-worker path's own loader (for contrast) runs Python workers.
    python = ringloader.DataLoader(dataset, batch_size=10, num_workers=2, native=False)
    next(iter(python))
    assert python._converted is None
    assert "ringloader-worker" not in worker_executables(python)


def test_subset_random_split_and_negative_indices():
    dataset = TensorDataset(*features_and_labels(150, 3))
    train, val = random_split(dataset, [100, 50], generator=torch.Generator().manual_seed(0))
    ours = same_as_torch(train, batch_size=12, shuffle=True,
                         generator=lambda: torch.Generator().manual_seed(1))
    assert isinstance(ours._converted, ConvertedRows)
    same_as_torch(val, batch_size=7, num_workers=0)
    same_as_torch(Subset(train, [-1, 0, -100, 99, 5]), batch_size=2)


def test_concat_of_tensor_datasets_and_subsets():
    a = TensorDataset(*features_and_labels(70, 4))
    b = TensorDataset(*features_and_labels(45, 5))
    same_as_torch(ConcatDataset([a, b]), batch_size=16, shuffle=True,
                  generator=lambda: torch.Generator().manual_seed(2))
    mixed = ConcatDataset([Subset(a, [5, 3, 60, 1]), b,
                           Subset(ConcatDataset([b, a]), [0, 100, 44, -1])])
    ours = same_as_torch(mixed, batch_size=3)
    assert isinstance(ours._converted, ConvertedRows)
    same_as_torch(Subset(mixed, [10, 0, 50, 3]), batch_size=2, num_workers=0)


def test_samplers_and_batch_samplers():
    dataset = TensorDataset(*features_and_labels(120, 6))
    same_as_torch(dataset, batch_size=9, sampler=lambda: SubsetRandomSampler(
        list(range(0, 120, 2)), generator=torch.Generator().manual_seed(3)))
    same_as_torch(dataset, batch_size=8, sampler=lambda: WeightedRandomSampler(
        torch.linspace(0.1, 1, 120), 77, generator=torch.Generator().manual_seed(4)))
    same_as_torch(dataset, batch_sampler=lambda: torch.utils.data.BatchSampler(
        range(120), 11, drop_last=False))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32,
                                   torch.int64, torch.float16, torch.bfloat16,
                                   torch.float64, torch.bool])
def test_every_row_dtype_and_shape(dtype):
    features, labels = features_and_labels(37, 7, shape=(2, 3, 5), dtype=dtype)
    ours = same_as_torch(TensorDataset(features, labels), batch_size=6)
    assert isinstance(ours._converted, ConvertedRows)
    same_as_torch(TensorDataset(features[:, 0, 0, 0]), batch_size=6)  # 0-d rows, one tensor


def test_single_tensor_and_non_contiguous_tensors():
    features, labels = features_and_labels(64, 8, shape=(6, 5))
    same_as_torch(TensorDataset(features), batch_size=10, num_workers=0)
    transposed = features.transpose(1, 2)  # rows not contiguous in memory
    ours = same_as_torch(TensorDataset(transposed, labels[::1]), batch_size=10)
    assert isinstance(ours._converted, ConvertedRows)


def test_custom_collate_sees_torchs_samples():
    dataset = TensorDataset(*features_and_labels(30, 9))

    def collate(samples):
        return {"x": torch.stack([s[0] for s in samples]).sum(1),
                "y": [int(s[1]) for s in samples], "kinds": type(samples[0]).__name__}
    ours = ringloader.DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=collate)
    theirs = torch.utils.data.DataLoader(dataset, batch_size=4, collate_fn=collate)
    for a, b in zip(ours, theirs):
        assert a["y"] == b["y"] and a["kinds"] == b["kinds"] == "tuple"
        assert torch.equal(a["x"], b["x"])


@pytest.mark.parametrize("make, why", [
    (lambda f, y: TensorDataset(f, y, y), "3 tensors"),
    (lambda f, y: TensorDataset(f, y.float()), "not 1-D int64"),
    (lambda f, y: TensorDataset(f, y[:, None]), "not 1-D int64"),
    (lambda f, y: TensorDataset(f.requires_grad_(), y), "requires grad"),
    (lambda f, y: TensorDataset(f.to(torch.complex64), y), "no native row type"),
    (lambda f, y: Subset(TensorDataset(f, y), [0, 40]), "outside its dataset"),
    (lambda f, y: ConcatDataset([TensorDataset(f, y), TensorDataset(f.double(), y)]),
     "differ"),
])
def test_what_cannot_go_native_keeps_python_workers_and_says_why(make, why, capfd):
    features, labels = features_and_labels(40, 10)
    dataset = make(features, labels)
    ours = ringloader.DataLoader(dataset, batch_size=8, num_workers=2)
    assert ours._converted is None
    assert why in capfd.readouterr().err
    if why != "outside its dataset":  # torch raises at that batch, as ours
        theirs = torch.utils.data.DataLoader(dataset, batch_size=8)
        for a, b in zip(ours, theirs):
            for x, y in zip(a, b):
                assert torch.equal(x.detach(), y.detach())


def test_subclass_with_its_own_getitem_stays_a_user_dataset(capfd):
    class Noisy(TensorDataset):
        def __getitem__(self, i):
            return self.tensors[0][i] * 2, self.tensors[1][i]
    ours = ringloader.DataLoader(Noisy(*features_and_labels(20, 11)), batch_size=4,
                                 num_workers=2)
    assert ours._converted is None
    assert "ringloader:" not in capfd.readouterr().err  # a user dataset: silent


def test_the_native_loader_refuses_a_pipeline_over_rows():
    from ringloader import _ringloader
    rows = ConvertedRows(TensorDataset(*features_and_labels(10, 12)))
    options = {"batch_size": 2, "num_workers": 0}
    _ringloader.NativeLoader(rows.ringloader_dataset_json(), "[]", options)
    with pytest.raises(ringloader.OptionError, match="pipeline must be empty"):
        _ringloader.NativeLoader(rows.ringloader_dataset_json(), '[{"op": "ToTensor"}]',
                                 options)


def test_changing_the_tensors_in_place_is_said_at_the_next_epoch():
    features, labels = features_and_labels(20, 13)
    ours = ringloader.DataLoader(TensorDataset(features, labels), batch_size=5)
    first = [batch[0].clone() for batch in ours]
    features.add_(1)  # torch's next epoch would see it; the memfd holds the old rows
    with pytest.warns(UserWarning, match="changed in place"):
        again = [batch[0].clone() for batch in ours]
    assert all(torch.equal(a, b) for a, b in zip(first, again))


def test_a_saved_state_resumes_in_a_new_loader_of_the_same_rows():
    dataset = TensorDataset(*features_and_labels(60, 14))

    def loader(workers):
        return ringloader.DataLoader(dataset, batch_size=7, shuffle=True, seed=3,
                                     num_workers=workers,
                                     generator=torch.Generator().manual_seed(9))
    expected = [[t.clone() for t in batch] for batch in loader(2)]
    first = loader(2)
    iterator = iter(first)
    taken = [next(iterator) for _ in range(3)]
    state = first.state_dict()
    # Another loader: its memfd has another /proc path, its rows the same bytes.
    second = loader(0)
    second.load_state_dict(state)
    rest = list(second)
    assert len(taken) + len(rest) == len(expected) == 9
    for a, b in zip(taken + rest, expected):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
