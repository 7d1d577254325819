# SPDX-License-Identifier: BSD-3-Clause
"""DALI's own CPU auto-augment for bench/recipes.py --dali (issue 43): the
references' recipes as DALI writes them, on the CPU (device_id=None), so
that DALI, torch's DataLoader and ringloader run the same recipe on the same
corpus in one run.

Per recipe: fn.readers.file (shuffled) -> fn.decoders.image_random_crop
(device="cpu", RandomResizedCrop's area and aspect ranges) -> fn.resize to
224x224 (bilinear, antialiased) -> fn.flip (a coin flip) -> the augment ->
fn.crop_mirror_normalize (float CHW, ImageNet mean and std). The augments are
nvidia.dali.auto_aug's own:

  ta_wide   trivial_augment.trivial_augment_wide (31 bins)
  ra        rand_augment.rand_augment(n=2, m=9)
  imagenet  auto_augment.auto_augment (policy "image_net")

DALI's recipe has no RandomErasing (ta_wide's p=0.1 erase on the other
sides): auto_aug does not include one, and fn.erase takes fixed regions.
Its ops are DALI's, not Pillow's (fill, interpolation and magnitudes follow
DALI's defaults), so the pixels differ from torchvision's; the work per image
is the same kind. Batches come back as torch tensors (from the pipeline's
CPU outputs), as bench/peers does.

A bench-only dependency: nvidia-dali-cuda130 (bench/peers/requirements-peers.txt).
"""
import math

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
RECIPES = ("ta_wide", "ra", "imagenet")


class DaliEpochs:
    """One epoch of a built DALI pipeline per iteration, as torch tensors."""

    def __init__(self, pipeline, batch_size):
        self.pipeline = pipeline
        self.batches = math.ceil(pipeline.epoch_size("reader") / batch_size)
        self.dataset = range(pipeline.epoch_size("reader"))

    def __iter__(self):
        import torch
        for _ in range(self.batches):
            images, labels = self.pipeline.run()
            yield torch.from_numpy(images.as_array()), torch.from_numpy(labels.as_array())


def dali_loader(corpus, recipe, batch_size, threads, seed=0):
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.auto_aug import auto_augment, rand_augment, trivial_augment

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None,
                  prefetch_queue_depth=2, enable_conditionals=True, seed=seed)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=corpus, random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(
            jpegs, device="cpu", output_type=types.RGB,
            random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3])
        images = fn.resize(images, resize_x=224, resize_y=224,
                           interp_type=types.INTERP_LINEAR, antialias=True)
        images = fn.flip(images, horizontal=fn.random.coin_flip())
        if recipe == "ta_wide":
            images = trivial_augment.trivial_augment_wide(images)
        elif recipe == "ra":
            images = rand_augment.rand_augment(images, n=2, m=9)
        else:
            images = auto_augment.auto_augment(images, policy_name="image_net")
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, output_layout="CHW",
            mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD])
        return images, labels

    pipeline = pipe()
    pipeline.build()
    return DaliEpochs(pipeline, batch_size)
