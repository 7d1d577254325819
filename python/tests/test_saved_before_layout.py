# SPDX-License-Identifier: BSD-3-Clause
"""What users saved before issue 44 moved the private modules into
sub-packages and split datasets.py still loads. data/ holds files written by
the package of commit bf9a26a (data/make_saved_before_layout.py says how):
pickles that name the old module paths, and a DataLoader state_dict taken in
the middle of an epoch with the batches that followed it."""
import importlib
import os
import pickle
import pickletools

import pytest
import torch

import ringloader
from ringloader import _moved
from ringloader import transforms as T

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def pickled():
    with open(os.path.join(DATA, "pickled_before_layout.pkl"), "rb") as f:
        return pickle.load(f)


def pipeline():
    return T.Compose([T.RandomResizedCrop(12), T.RandomHorizontalFlip(), T.ToTensor(),
                      T.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])])


def test_every_old_private_module_path_is_the_moved_module():
    for old, new in _moved.MOVED.items():
        assert importlib.import_module("ringloader." + old) is \
            importlib.import_module("ringloader." + new)


def test_objects_pickled_under_the_old_module_paths_load():
    from ringloader._slots import batch_codec, batch_structure
    from ringloader._workers import iterable_worker
    reshaped, end, too_big = pickle.loads(pickled()["private"])
    assert type(reshaped) is batch_structure.Reshaped and reshaped == (2, 3)
    assert end is iterable_worker.END
    assert type(too_big) is batch_codec.TooBig and (too_big.needed, too_big.capacity) == (10, 4)


def test_a_transform_pickled_before_loads_and_is_the_same_pipeline():
    old = pickled()
    loaded = pickle.loads(old["transform"])
    assert isinstance(loaded, T.Compose) and repr(loaded) == old["transform_repr"]
    assert loaded.to_pipeline() == pipeline().to_pipeline()


def test_a_transform_defined_in_a_moved_module_loads():
    # ringloader.transforms.AutoAugment was defined in ringloader._convert_autoaugment.
    augment = pickle.loads(pickled()["autoaugment"])
    assert type(augment) is T.AutoAugment
    assert augment.to_op() == T.AutoAugment().to_op()


def test_a_dataset_pickled_before_loads_as_the_same_class():
    dataset = pickle.loads(pickled()["idx"])
    assert type(dataset) is ringloader.datasets.IdxDataset and len(dataset) == 5


@pytest.mark.parametrize("name", ringloader.datasets.__all__ + ["NativeDataset"])
def test_datasets_pickle_under_the_module_path_they_always_had(name):
    # Pickles name ringloader.datasets.<Class>, as when datasets was one
    # module: older releases load today's pickles, and today loads theirs.
    cls = getattr(ringloader.datasets, name)
    globals_named = [arg for op, arg, _ in pickletools.genops(pickle.dumps(cls, protocol=2))
                     if op.name == "GLOBAL"]
    assert globals_named == [f"ringloader.datasets {name}"]
    assert pickle.loads(pickle.dumps(cls)) is cls


def test_a_state_dict_saved_before_resumes_with_the_same_batches():
    old = torch.load(os.path.join(DATA, "saved_before_layout.pt"), weights_only=False)
    loader = ringloader.DataLoader(
        torch.utils.data.TensorDataset(torch.arange(72.).view(24, 3), torch.arange(24)),
        batch_size=5, shuffle=True, num_workers=2, generator=torch.Generator().manual_seed(7))
    loader.load_state_dict(old["state"])
    rest = list(loader)
    assert len(rest) == len(old["rest"]) == 3
    for (x, y), (old_x, old_y) in zip(rest, old["rest"]):
        assert torch.equal(x, old_x) and torch.equal(y, old_y)
