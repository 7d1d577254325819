# SPDX-License-Identifier: BSD-3-Clause
"""_batch_codec: any batch into a slot and back, tensors zero-copy, every
offset a worker wrote bounds-checked by the trainer."""
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from conftest import env_importing_ringloader
from ringloader._slots import batch_codec as codec

START = 4096


def _slot(size=1 << 22):
    memory = memoryview(bytearray(size))
    return memory, torch.frombuffer(memory, dtype=torch.uint8)


def test_any_structure_round_trips_and_large_tensors_alias_the_slot():
    slot, raw = _slot()
    image = torch.randn(3, 97, 131)
    batch = ((image, image[0, :5].t()),
             [{"boxes": torch.rand(5, 4), "labels": torch.arange(5)},
              {"boxes": torch.rand(0, 4), "labels": torch.arange(0)}],
             ["text", None, 3.5, np.arange(4)], torch.tensor(True))
    end = codec.encode_into(batch, slot, START)
    assert codec.is_encoded(raw, START) and codec.encoded_end(raw, START) == end
    out = codec.decode(raw, START)
    assert torch.equal(out[0][0], image) and torch.equal(out[0][1], image[0, :5].t())
    assert torch.equal(out[1][0]["boxes"], batch[1][0]["boxes"])
    assert out[1][1]["boxes"].shape == (0, 4)
    assert out[2][:3] == ["text", None, 3.5] and (out[2][3] == np.arange(4)).all()
    assert out[3].dtype == torch.bool and bool(out[3])
    # The image is a view of the slot; small tensors are copies.
    start, stop = raw.data_ptr(), raw.data_ptr() + raw.numel()
    assert start <= out[0][0].data_ptr() < stop
    assert not start <= out[1][0]["labels"].data_ptr() < stop


def test_a_batch_over_the_capacity_raises_too_big_naming_the_size():
    slot, raw = _slot(1 << 16)
    with pytest.raises(codec.TooBig) as caught:
        codec.encode_into(torch.zeros(1 << 16), slot, 0)
    assert caught.value.needed > caught.value.capacity == 1 << 16
    assert not codec.is_encoded(raw, 0)


COLLECT_A_TOO_BIG = textwrap.dedent("""
    import gc
    from ringloader._slots import batch_codec as codec

    def provoke():
        slot = memoryview(bytearray(1 << 16))
        try:  # the pickled part (not tensors) is over the slot
            codec.encode_into(["x" * 100 + str(i) for i in range(2000)], slot, 0)
        except codec.TooBig as error:
            kept = error  # this frame -> kept -> its traceback -> this frame
            return kept.needed

    assert provoke() > 1 << 16
    gc.collect()
    print("collected")
""")


def test_a_too_big_batch_in_a_reference_cycle_is_collected():
    """encode_into's BytesIO view, reachable from a TooBig's traceback in a
    cycle, crashed CPython 3.12.1's collector (python/cpython#111211): a
    SIGSEGV of the whole pytest process in the torch 2.x stage. The view is
    now released before the error leaves."""
    done = subprocess.run([sys.executable, "-c", COLLECT_A_TOO_BIG],
                          env=env_importing_ringloader(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["collected"], \
        (done.returncode, done.stderr[-2000:])


def test_a_failed_encode_leaves_no_valid_header_behind():
    slot, raw = _slot(1 << 16)
    codec.encode_into([torch.ones(4)], slot, 0)
    with pytest.raises(codec.TooBig):
        codec.encode_into([torch.zeros(1 << 16)], slot, 0)
    assert not codec.is_encoded(raw, 0)


@pytest.mark.parametrize("field,value", [(1, 1 << 40), (2, 8), (3, 1 << 30)])
def test_a_scribbled_header_is_refused(field, value):
    slot, raw = _slot()
    codec.encode_into([torch.ones(1000)], slot, START)
    struct.pack_into("<Q", slot, START + 8 * field, value)
    with pytest.raises(codec.CorruptBatch):
        codec.decode(raw, START)


def test_a_tensor_entry_outside_the_batch_is_refused():
    slot, raw = _slot()

    class Evil(codec._SlotPickler):
        def persistent_id(self, obj):
            pid = super().persistent_id(obj)
            return None if pid is None else (1 << 20,) + pid[1:]

    import io
    buffer = io.BytesIO()
    pickler = Evil(buffer, raw, START, len(slot) - START)
    pickler.dump([torch.ones(2000)])
    blob = buffer.getvalue()
    offset = pickler.next
    slot[START + offset:START + offset + len(blob)] = blob
    codec._HEADER.pack_into(slot, START, codec.MAGIC, offset + len(blob), offset, len(blob))
    with pytest.raises(codec.CorruptBatch, match="outside"):
        codec.decode(raw, START)


def _forged(slot, raw, entry):
    """A batch of one tensor whose entry `entry` rewrites (a hostile worker)."""
    import io

    class Forger(codec._SlotPickler):
        def persistent_id(self, obj):
            pid = super().persistent_id(obj)
            return None if pid is None else entry(pid)

    buffer = io.BytesIO()
    pickler = Forger(buffer, raw, START, len(slot) - START)
    pickler.dump([torch.ones(2000)])
    blob = buffer.getvalue()
    offset = pickler.next
    slot[START + offset:START + offset + len(blob)] = blob
    codec._HEADER.pack_into(slot, START, codec.MAGIC, offset + len(blob), offset, len(blob))


@pytest.mark.parametrize("dims", [65, 200])
def test_a_tensor_entry_with_too_many_dimensions_is_corrupt(dims):
    """torch refuses over 64 dimensions with a bare RuntimeError: the
    trainer must say CorruptBatch, as for any other bad entry."""
    slot, raw = _slot()
    _forged(slot, raw, lambda pid: (pid[0], pid[1], (1,) * dims, pid[3], None))
    with pytest.raises(codec.CorruptBatch, match="invalid"):
        codec.decode(raw, START)


def test_requires_grad_and_dtypes_survive():
    slot, raw = _slot()
    batch = {dtype: torch.ones(3000, dtype=dtype) for dtype in
             (torch.float16, torch.bfloat16, torch.int8, torch.complex64, torch.float64)}
    batch["grad"] = torch.ones(2000, requires_grad=True)
    codec.encode_into(batch, slot, 0)
    out = codec.decode(raw, 0)
    for key, value in batch.items():
        assert out[key].dtype == value.dtype and torch.equal(out[key].detach(), value.detach())
    assert out["grad"].requires_grad


def test_dense_tensors_keep_their_strides_as_torchs_workers_hand_them_over():
    slot, raw = _slot()
    image = torch.arange(3 * 40 * 50, dtype=torch.float32).reshape(40, 50, 3).permute(2, 0, 1)
    channels_last = torch.rand(2, 3, 20, 30).contiguous(memory_format=torch.channels_last)
    small = torch.arange(12.).reshape(3, 4).t()
    sliced = torch.rand(10, 10)[:, 2:5]
    codec.encode_into([image, channels_last, small, sliced], slot, 0)
    out = codec.decode(raw, 0)
    for got, want in zip(out, [image, channels_last, small]):
        assert torch.equal(got, want) and got.stride() == want.stride()
    assert torch.equal(out[3], sliced) and out[3].is_contiguous()
