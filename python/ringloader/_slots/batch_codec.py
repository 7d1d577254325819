# SPDX-License-Identifier: BSD-3-Clause
"""Any batch, of any structure and size, into a ring slot and back: the
path for batches a worker collates itself (a custom ``collate_fn``,
``batch_size=None``, samples that outgrow sample 0's layout).

The batch is pickled with every plain CPU tensor taken out of band: its
elements are written into the slot, 64-byte aligned, and the pickle keeps
only (offset, dtype, shape). The trainer rebuilds the structure from the
pickle and each tensor as a view of the slot, so tensor data is written
once, by the worker, and never copied again (torch's loader pickles it in
the worker and copies it through shared memory). Everything else (numpy
arrays, strings, tensor subclasses) travels inside the pickle, as with
torch.

Layout from ``start`` (where the slot's fixed-layout part ends):

    header (64 bytes): magic, end, pickle offset, pickle length
    tensor data, each 64-byte aligned
    pickle

Offsets are relative to ``start``. The slot is virtually large (its memfd
pages are only committed when written), so a batch needs no byte budget up
front; its capacity is a cap (``max_batch_bytes``) that fails naming the
size. The header and every offset in the pickle are written by a worker, so
the trainer bounds-checks each against the slot before use.
"""
import io
import pickle
import struct

import torch

MAGIC = 0x52494E47434F4445  # "RINGCODE": the slot holds an encoded batch
HEADER_BYTES = 64
_HEADER = struct.Struct("<QQQQ")
_ALIGN = 64
# Tensors up to this size are copied out of the slot, so keeping labels or
# lengths never holds a ring slot (as _collate.SMALL_BATCH_BYTES).
SMALL_TENSOR_BYTES = 4096
_DTYPES = frozenset(
    getattr(torch, name) for name in (
        "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
        "float32", "float64", "complex64", "complex128") if hasattr(torch, name))


class TooBig(ValueError):
    """The batch needs more bytes than the slot's capacity."""

    def __init__(self, needed, capacity):
        super().__init__(needed, capacity)
        self.needed, self.capacity = needed, capacity


class CorruptBatch(RuntimeError):
    """A slot's encoded batch does not hold together (a worker wrote past
    what it declared, or a peer scribbled on the slot)."""


def _align(offset):
    return (offset + _ALIGN - 1) // _ALIGN * _ALIGN


def _travels_out_of_band(obj):
    return (type(obj) is torch.Tensor and obj.layout == torch.strided
            and obj.device.type == "cpu" and obj.dtype in _DTYPES
            and not obj.is_conj() and not obj.is_neg())


class _SlotPickler(pickle.Pickler):
    def __init__(self, file, whole, start, capacity):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.whole, self.start, self.capacity = whole, start, capacity
        self.next = HEADER_BYTES  # relative to start

    def persistent_id(self, obj):
        if not _travels_out_of_band(obj):
            return None
        dense, order = _dense_layout(obj)
        nbytes = obj.numel() * obj.element_size()
        offset = _align(self.next)
        if offset + nbytes > self.capacity:
            raise TooBig(offset + nbytes, self.capacity)
        if nbytes:
            at = self.start + offset
            self.whole[at:at + nbytes].view(obj.dtype).view(dense.shape).copy_(dense)
        self.next = offset + nbytes
        return (offset, obj.dtype, tuple(dense.shape), obj.requires_grad, order)


def _dense_layout(tensor):
    """(the tensor with its dimensions in memory order, that order or None).
    torch's workers hand tensors over with their strides (a permuted
    PILToTensor image, channels_last), and models give slightly different
    sums for another layout: a dense tensor keeps its strides here too.
    Others (overlapping, sliced) travel contiguous, as their values."""
    if tensor.is_contiguous():
        return tensor, None
    order = sorted(range(tensor.dim()), key=lambda d: (-tensor.stride(d), -tensor.size(d)))
    permuted = tensor.permute(order)
    if permuted.is_contiguous():
        return permuted, tuple(order)
    return tensor.contiguous(), None


def encode_into(batch, slot, start=0):
    """Writes `batch` into `slot` (a writable memoryview) from `start`;
    returns the end (absolute) of what was written. Raises TooBig when the
    slot's bytes after `start` do not hold it (nothing is marked valid)."""
    whole = torch.frombuffer(slot, dtype=torch.uint8)
    capacity = len(slot) - start
    if capacity < HEADER_BYTES:
        raise TooBig(HEADER_BYTES, max(capacity, 0))
    # A reused slot may hold an older valid header: invalidate it first, so
    # a failure part-way never leaves a batch that looks whole.
    old_end = previous_end(slot, start)
    struct.pack_into("<Q", slot, start, 0)
    buffer = io.BytesIO()
    pickler = _SlotPickler(buffer, whole, start, capacity)
    with torch.no_grad():  # a tensor that requires grad is copied, not traced
        pickler.dump(batch)
    # The view is released before any exception leaves: a live
    # BytesIO.getbuffer() export in a reference cycle (this frame, held by
    # a TooBig's traceback) crashes CPython 3.12's garbage collector
    # (python/cpython#111211; seen as a SIGSEGV in the pytest process).
    with buffer.getbuffer() as blob:
        offset, length = pickler.next, len(blob)
        end = offset + length
        if end > capacity:
            raise TooBig(end, capacity)
        slot[start + offset:start + end] = blob
    _HEADER.pack_into(slot, start, MAGIC, end, offset, length)
    release_tail(slot, start + end, old_end)
    return start + end


def encoded_start(fixed_bytes):
    """Where the encoded part of a slot starts, after `fixed_bytes` of
    fixed layout (_batch_structure)."""
    return _align(fixed_bytes)


def slot_bytes(fixed_bytes, max_batch_bytes):
    """A slot's size: the fixed layout, then room for an encoded batch of
    up to `max_batch_bytes`. Virtual: pages are committed as written."""
    return encoded_start(fixed_bytes) + HEADER_BYTES + int(max_batch_bytes)


def mark_unencoded(slot, start):
    """Marks the slot as holding a fixed-layout batch (its encoded header,
    from an earlier batch, no longer counts); gives back the pages of an
    earlier large batch."""
    if start + HEADER_BYTES <= len(slot):
        release_tail(slot, start, previous_end(slot, start))
        struct.pack_into("<Q", slot, start, 0)


def previous_end(slot, start):
    """The end (absolute) of the encoded batch the slot held before, or
    `start` when it held none. Read from memory a worker wrote: clamped."""
    if start + HEADER_BYTES > len(slot):
        return start
    magic, end, _, _ = _HEADER.unpack_from(slot, start)
    return start + min(end, len(slot) - start) if magic == MAGIC else start


_PAGE = 4096
_KEEP_SLACK = 8 << 20  # a slot keeps up to this much beyond twice its batch
_MADV_REMOVE = 9


def release_tail(slot, end, old_end):
    """Gives back the slot's pages from `end` to `old_end` (where an earlier,
    larger batch ended) when they are many: a slot's memory follows the
    batches it holds now, not the largest it ever held. Small differences
    are kept, so batches of varying size do not fault pages in each time."""
    if old_end - end <= end + _KEEP_SLACK:
        return
    import ctypes
    base = ctypes.addressof(ctypes.c_char.from_buffer(slot))
    # Whole pages inside [end, old_end) only: they hold this slot's bytes
    # and no other's. MADV_REMOVE frees the memfd's pages for every process
    # that maps them.
    first = (base + end + _PAGE - 1) // _PAGE * _PAGE
    last = (base + old_end) // _PAGE * _PAGE
    if last > first:
        _libc().madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), _MADV_REMOVE)


def _libc():
    import ctypes
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


_LIBC = None


def is_encoded(raw, start=0):
    """Whether the slot `raw` (a uint8 tensor) holds an encoded batch at `start`."""
    if start + HEADER_BYTES > raw.numel():
        return False
    return _header(raw, start)[0] == MAGIC


def encoded_end(raw, start=0):
    """The absolute end of the encoded batch at `start`, bounds-checked."""
    _, end, _, _ = _checked_header(raw, start)
    return start + end


def _header(raw, start):
    return _HEADER.unpack(raw[start:start + _HEADER.size].numpy().tobytes())


def _checked_header(raw, start):
    magic, end, offset, length = _header(raw, start)
    limit = raw.numel() - start
    if magic != MAGIC or not (HEADER_BYTES <= offset <= end <= limit) \
            or offset + length != end:
        raise CorruptBatch(f"ringloader: a slot's batch header is invalid "
                           f"(end {end}, pickle at {offset}+{length}, slot {limit} bytes)")
    return magic, end, offset, length


# The most dimensions a torch tensor has.
_MAX_DIMS = 64


class _SlotUnpickler(pickle.Unpickler):
    def __init__(self, file, raw, start, end):
        super().__init__(file)
        self.raw, self.start, self.end = raw, start, end

    def persistent_load(self, pid):
        try:
            offset, dtype, shape, requires_grad, order = pid
            shape = tuple(int(n) for n in shape)
            if len(shape) > _MAX_DIMS:  # torch's own limit, a bare RuntimeError
                raise ValueError(f"{len(shape)} dimensions")
            if order is not None and sorted(order) != list(range(len(shape))):
                raise ValueError(order)
            numel = 1
            for n in shape:
                if n < 0:
                    raise ValueError(n)
                numel *= n
            itemsize = torch.empty((), dtype=dtype).element_size()
        except (TypeError, ValueError) as error:
            raise CorruptBatch(f"ringloader: a slot's tensor entry {pid!r} is invalid") \
                from error
        nbytes = numel * itemsize
        if dtype not in _DTYPES or not isinstance(offset, int) or offset % _ALIGN \
                or not HEADER_BYTES <= offset <= offset + nbytes <= self.end:
            raise CorruptBatch(f"ringloader: a slot's tensor entry (offset {offset}, "
                               f"{nbytes} bytes) lies outside its batch's "
                               f"{self.end} bytes")
        at = self.start + offset
        try:  # whatever else torch refuses is a bad entry too, not a bare RuntimeError
            tensor = self.raw[at:at + nbytes].view(dtype).view(shape)
            if order is not None:  # back to the sender's dimension order
                tensor = tensor.permute(sorted(range(len(order)), key=order.__getitem__))
            if nbytes <= SMALL_TENSOR_BYTES:
                tensor = tensor.clone(memory_format=torch.preserve_format)
            return tensor.requires_grad_() if requires_grad else tensor
        except RuntimeError as error:
            raise CorruptBatch(f"ringloader: a slot's tensor entry {pid!r} is invalid: "
                               f"{error}") from error


def decode(raw, start=0):
    """The batch encoded at `start` of the slot `raw` (a uint8 tensor over
    the whole slot); large tensors are views of `raw`, so they share its
    storage (a spilled batch's tensors follow it)."""
    _, end, offset, length = _checked_header(raw, start)
    blob = raw[start + offset:start + end].numpy().tobytes()
    return _SlotUnpickler(io.BytesIO(blob), raw, start, end).load()
