# SPDX-License-Identifier: BSD-3-Clause
"""What users saved before issue 44 moved the private modules into
sub-packages still loads: data/saved_before_layout.pt was written by the
package of commit bf9a26a (data/make_saved_before_layout.py says how) and
holds a DataLoader state_dict taken in the middle of an epoch with the
batches that followed it, a pickled transform pipeline, and pickled objects
of classes whose modules moved (their pickles name the old modules)."""
import importlib
import os
import pickle

import torch

import ringloader
from ringloader import _moved
from ringloader import transforms as T

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                       "saved_before_layout.pt")


def saved():
    return torch.load(FIXTURE, weights_only=False)


def test_every_old_private_module_path_is_the_moved_module():
    for old, new in _moved.MOVED.items():
        assert importlib.import_module("ringloader." + old) is \
            importlib.import_module("ringloader." + new)


def test_objects_pickled_under_the_old_module_paths_load():
    from ringloader._slots import batch_codec, batch_structure
    from ringloader._workers import iterable_worker
    reshaped, end, too_big = pickle.loads(saved()["private"])
    assert type(reshaped) is batch_structure.Reshaped and reshaped == (2, 3)
    assert end is iterable_worker.END
    assert type(too_big) is batch_codec.TooBig and (too_big.needed, too_big.capacity) == (10, 4)


def test_a_transform_pickled_before_loads_and_is_the_same_pipeline():
    old = saved()
    pipeline = pickle.loads(old["transform"])
    assert isinstance(pipeline, T.Compose)
    assert repr(pipeline) == old["transform_repr"]
    fresh = T.Compose([T.RandomResizedCrop(12), T.RandomHorizontalFlip(), T.ToTensor(),
                       T.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])])
    assert pipeline.to_pipeline() == fresh.to_pipeline()


def test_a_state_dict_saved_before_resumes_with_the_same_batches():
    old = saved()
    loader = ringloader.DataLoader(
        torch.utils.data.TensorDataset(torch.arange(72.).view(24, 3), torch.arange(24)),
        batch_size=5, shuffle=True, num_workers=2, generator=torch.Generator().manual_seed(7))
    loader.load_state_dict(old["state"])
    rest = list(loader)
    assert len(rest) == len(old["rest"]) == 3
    for (x, y), (old_x, old_y) in zip(rest, old["rest"]):
        assert torch.equal(x, old_x) and torch.equal(y, old_y)
