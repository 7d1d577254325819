# SPDX-License-Identifier: BSD-3-Clause
"""Batches cross the binding with named fields (_ringloader.Batch), so the
Python side never reads them by position."""
import torchvision.transforms as T

import ringloader
from ringloader import _ringloader


def _native(image_folder, **options):
    dataset = ringloader.datasets.ImageFolder(image_folder, T.Compose([
        T.Resize((8, 8)), T.ToTensor()]))
    return _ringloader.NativeLoader(dataset.ringloader_dataset_json(),
                                    dataset.ringloader_pipeline_json(),
                                    dict({"batch_size": 5}, **options))


def test_next_gives_a_named_batch(image_folder):
    native = _native(image_folder)
    native.set_epoch(3)
    native.start_epoch()
    batch = native.next()
    assert type(batch) is _ringloader.Batch
    assert batch._fields == ("data", "target", "epoch", "index", "sample_indices")
    assert tuple(batch.data.shape) == (5, 3, 8, 8)
    assert batch.target.tolist() == [i // 8 for i in batch.sample_indices]
    assert (batch.epoch, batch.index) == (3, 0)
    assert batch.sample_indices == [0, 1, 2, 3, 4]
    second = native.next()
    assert second.index == 1
    native.put_back(second)  # a Batch goes back as it came
    again = native.next()
    assert again.index == 1 and again.sample_indices == second.sample_indices
