# SPDX-License-Identifier: BSD-3-Clause
"""The loaders compared in bench/peers: one factory per peer, each set up the
way its own docs recommend for speed, all doing the same work:
RandomResizedCrop(224) + horizontal flip + float32 CHW + Normalize(ImageNet),
batch 64, shuffled, 2 workers or threads.

A factory takes the run's options (`opts`: data paths, batch size, workers)
and returns `epoch()`, a function that returns an iterator over one epoch's
batches, each a pair (float32 N x 3 x 224 x 224 tensor or array, labels).
Imports stay inside the factories: each run imports only its own peer.
"""
import math
import os
import random

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)


def torchvision_transform():
    import torchvision.transforms as T
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                      T.ToTensor(), T.Normalize(MEAN, STD)])


def crop_box(width, height, rng=random):
    """torchvision's RandomResizedCrop.get_params, on a size: (top, left, h, w)."""
    area = width * height
    log_ratio = (math.log(RATIO[0]), math.log(RATIO[1]))
    for _ in range(10):
        target = area * rng.uniform(*SCALE)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    ratio = width / height
    if ratio < RATIO[0]:
        w, h = width, int(round(width / RATIO[0]))
    elif ratio > RATIO[1]:
        h, w = height, int(round(height * RATIO[1]))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def folder_samples(root):
    """(path, class index) pairs in torchvision ImageFolder's order."""
    classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
    return [(os.path.join(root, c, f), i) for i, c in enumerate(classes)
            for f in sorted(os.listdir(os.path.join(root, c)))]


# --- torch.utils.data.DataLoader + torchvision (Pillow or Pillow-SIMD) ------

def torch_dataloader(opts):
    import torch
    import torchvision
    dataset = torchvision.datasets.ImageFolder(opts.folder, torchvision_transform())
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=opts.batch_size, shuffle=True, num_workers=opts.workers,
        persistent_workers=True, prefetch_factor=2)
    return lambda: iter(loader)


# --- torchdata.nodes -------------------------------------------------------

def torchdata_nodes(opts, method="process"):
    import torch
    import torchvision
    from torch.utils.data import RandomSampler
    from torchdata.nodes import (Batcher, Loader, Mapper, ParallelMapper,
                                 Prefetcher, SamplerWrapper)
    dataset = torchvision.datasets.ImageFolder(opts.folder, torchvision_transform())
    node = SamplerWrapper(RandomSampler(dataset))
    node = ParallelMapper(node, map_fn=dataset.__getitem__, num_workers=opts.workers,
                          method=method, in_order=False)
    node = Batcher(node, batch_size=opts.batch_size, drop_last=False)
    node = Mapper(node, torch.utils.data.default_collate)
    node = Prefetcher(node, prefetch_factor=2)
    loader = Loader(node)
    return lambda: iter(loader)


def torchdata_nodes_thread(opts):
    return torchdata_nodes(opts, method="thread")


# --- WebDataset on the tar shards -------------------------------------------

def webdataset(opts):
    import webdataset as wds
    transform = torchvision_transform()
    dataset = (wds.WebDataset(opts.shards, shardshuffle=len(opts.shard_list),
                              empty_check=False)
               .shuffle(1000).decode("pil").to_tuple("jpg", "cls")
               .map_tuple(transform, int).batched(opts.batch_size, partial=True))
    loader = wds.WebLoader(dataset, batch_size=None, num_workers=opts.workers,
                           persistent_workers=True, prefetch_factor=2)
    return lambda: iter(loader)


# --- SPDL: FFmpeg decode + crop + scale + flip per image, threads ------------

def spdl(opts):
    import spdl.io
    import torch
    from spdl.pipeline import PipelineBuilder
    samples = folder_samples(opts.folder)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD).view(1, 3, 1, 1) * 255

    def decode(sample):
        path, label = sample
        packets = spdl.io.demux_image(path)
        top, left, h, w = crop_box(packets.width, packets.height)
        flip = "hflip," if random.random() < 0.5 else ""
        desc = (f"crop={w}:{h}:{left}:{top},scale=224:224:flags=bilinear,"
                f"{flip}format=pix_fmts=rgb24")
        return spdl.io.decode_packets(packets, filter_desc=desc), label

    def collate(items):
        buffer = spdl.io.convert_frames([frames for frames, _ in items])
        images = spdl.io.to_torch(buffer).permute(0, 3, 1, 2).float()
        images = images.sub_(mean).div_(std)
        return images, torch.tensor([label for _, label in items])

    def epoch():
        order = random.sample(samples, len(samples))
        pipeline = (PipelineBuilder().add_source(order)
                    .pipe(decode, concurrency=opts.workers)
                    .aggregate(opts.batch_size)
                    .pipe(collate)
                    .add_sink(3)
                    .build(num_threads=opts.workers + 1))  # + the collate stage
        with pipeline.auto_stop():
            yield from pipeline.get_iterator()
    return epoch


# --- NVIDIA DALI, CPU only (device_id=None) ----------------------------------

def dali(opts):
    import torch
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=opts.batch_size, num_threads=opts.workers,
                  device_id=None, prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=opts.folder, random_shuffle=True,
                                        name="reader")
        images = fn.decoders.image_random_crop(
            jpegs, device="cpu", output_type=types.RGB,
            random_area=list(SCALE), random_aspect_ratio=list(RATIO))
        images = fn.resize(images, resize_x=224, resize_y=224,
                           interp_type=types.INTERP_LINEAR, antialias=True)
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, output_layout="CHW",
            mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
            mirror=fn.random.coin_flip())
        return images, labels

    pipeline = pipe()
    pipeline.build()
    batches = math.ceil(pipeline.epoch_size("reader") / opts.batch_size)

    def epoch():
        for _ in range(batches):
            images, labels = pipeline.run()
            yield (torch.from_numpy(images.as_array()),
                   torch.from_numpy(labels.as_array()))
    return epoch


# --- LitData (its optimized chunks, written once by prepare.py) ---------------

def litdata(opts):
    import io

    import litdata as ld
    from PIL import Image
    transform = torchvision_transform()

    class Photos(ld.StreamingDataset):
        def __getitem__(self, index):
            item = super().__getitem__(index)
            image = Image.open(io.BytesIO(item["jpeg"])).convert("RGB")
            return transform(image), item["label"]

    dataset = Photos(f"local:{opts.litdata_dir}", shuffle=True)
    loader = ld.StreamingDataLoader(dataset, batch_size=opts.batch_size,
                                    num_workers=opts.workers, persistent_workers=True)
    return lambda: iter(loader)


# --- Mosaic Streaming (MDS shards written once by prepare.py) -----------------

def mosaic(opts):
    import io

    import streaming
    from PIL import Image
    transform = torchvision_transform()
    # A previous run's os._exit leaves its shared-memory names behind; its
    # docs call this before making a dataset in a fresh process.
    streaming.base.util.clean_stale_shared_memory()

    class Photos(streaming.StreamingDataset):
        def __getitem__(self, index):
            item = super().__getitem__(index)
            image = Image.open(io.BytesIO(item["jpeg"])).convert("RGB")
            return transform(image), item["label"]

    # Local shards only (remote=None); batch_size given to the dataset too,
    # as its docs ask (it partitions samples per batch).
    dataset = Photos(local=opts.mosaic_dir, shuffle=True, batch_size=opts.batch_size)
    loader = streaming.StreamingDataLoader(
        dataset, batch_size=opts.batch_size, num_workers=opts.workers,
        persistent_workers=True, prefetch_factor=2)
    return lambda: iter(loader)


# --- FFCV (.beton written once by prepare.py) --------------------------------

def ffcv(opts, beton=None):
    import numpy as np
    from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import (NormalizeImage, RandomHorizontalFlip, Squeeze,
                                 ToTensor, ToTorchImage)
    mean = np.array(MEAN) * 255
    std = np.array(STD) * 255
    pipelines = {
        "image": [RandomResizedCropRGBImageDecoder((224, 224), scale=SCALE, ratio=RATIO),
                  RandomHorizontalFlip(), NormalizeImage(mean, std, np.float32),
                  ToTensor(), ToTorchImage(channels_last=False)],
        "label": [IntDecoder(), ToTensor(), Squeeze()],
    }
    loader = Loader(beton or opts.ffcv_exact, batch_size=opts.batch_size,
                    num_workers=opts.workers, order=OrderOption.RANDOM,
                    os_cache=True, drop_last=False, pipelines=pipelines)
    return lambda: iter(loader)


def ffcv_recipe(opts):
    return ffcv(opts, opts.ffcv_recipe)


# --- ringloader: its public Python API ---------------------------------------

def _ringloader(opts, mode, shards=None, ring_slots=0):
    import ringloader
    import ringloader.transforms as R
    transform = R.Compose([R.RandomResizedCrop(224), R.RandomHorizontalFlip(),
                           R.ToTensor(), R.Normalize(MEAN, STD)], mode=mode)
    if shards:
        dataset = ringloader.datasets.TarShards(shards, transform)
    else:
        dataset = ringloader.datasets.ImageFolder(opts.folder, transform)
    loader = ringloader.DataLoader(dataset, batch_size=opts.batch_size, shuffle=True,
                                   num_workers=opts.workers, ring_slots=ring_slots)
    return lambda: iter(loader)


def ringloader_exact(opts):
    return _ringloader(opts, "exact")


def ringloader_fast(opts):
    return _ringloader(opts, "fast")


def ringloader_tar_exact(opts):
    return _ringloader(opts, "exact", opts.shards)


def ringloader_tar_fast(opts):
    return _ringloader(opts, "fast", opts.shards)


def ringloader_exact_noprestart(opts):
    """RINGLOADER_PRESTART=0 (documented in _python_workers.prestart): no
    Python-worker zygote at import, only when a Python dataset needs one.
    Under torch 2.x `import torch` leaves 2 threads, so the zygote cannot
    be forked from the trainer and is spawned: a second interpreter with
    torch (~355 MiB PSS) that native datasets never use."""
    os.environ["RINGLOADER_PRESTART"] = "0"
    return _ringloader(opts, "exact")


def ringloader_fast_noprestart(opts):
    os.environ["RINGLOADER_PRESTART"] = "0"
    return _ringloader(opts, "fast")


def ringloader_exact_4slots(opts):
    """ring_slots=4: the automatic max(4, 2W) since e44485c; before it, two
    38.5 MiB batches less than the automatic 2W + 2 = 6 (the memory rows)."""
    return _ringloader(opts, "exact", ring_slots=4)


def ringloader_fast_4slots(opts):
    return _ringloader(opts, "fast", ring_slots=4)


def ringloader_exact_3slots(opts):
    """ring_slots=3 = W + 1: one slot per worker being filled, one with the
    trainer; the least that keeps both workers busy."""
    return _ringloader(opts, "exact", ring_slots=3)


def ringloader_fast_3slots(opts):
    return _ringloader(opts, "fast", ring_slots=3)


def ringloader_small_fast(opts):
    """Shards re-encoded like FFCV's recipe (max side 256, quality 90)."""
    return _ringloader(opts, "fast", opts.small_shards)


def ringloader_small_exact(opts):
    return _ringloader(opts, "exact", opts.small_shards)


PEERS = {
    "torch": torch_dataloader,
    "torch-simd": torch_dataloader,  # same code, run by the Pillow-SIMD venv
    "torchdata-nodes": torchdata_nodes,
    "torchdata-nodes-thread": torchdata_nodes_thread,
    "webdataset": webdataset,
    "spdl": spdl,
    "dali-cpu": dali,
    "litdata": litdata,
    "mosaic": mosaic,
    "ffcv": ffcv,
    "ffcv-recipe": ffcv_recipe,
    "ringloader-exact": ringloader_exact,
    "ringloader-fast": ringloader_fast,
    "ringloader-exact-noprestart": ringloader_exact_noprestart,
    "ringloader-fast-noprestart": ringloader_fast_noprestart,
    "ringloader-exact-4slots": ringloader_exact_4slots,
    "ringloader-fast-4slots": ringloader_fast_4slots,
    "ringloader-exact-3slots": ringloader_exact_3slots,
    "ringloader-fast-3slots": ringloader_fast_3slots,
    "ringloader-tar-exact": ringloader_tar_exact,
    "ringloader-tar-fast": ringloader_tar_fast,
    "ringloader-small-exact": ringloader_small_exact,
    "ringloader-small-fast": ringloader_small_fast,
}
