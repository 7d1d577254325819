# SPDX-License-Identifier: BSD-3-Clause
"""The training recipes people use, unchanged, through torch's DataLoader and
ringloader.DataLoader in one run, rounds interleaved (issue 43's table).

Rows: torchvision's classification references (references/classification/
presets.py ClassificationPresetTrain, as train.py builds it):
  ta_wide   --auto-augment ta_wide --random-erase 0.1
  ra        --auto-augment ra
  imagenet  --auto-augment imagenet
  use_v2    --auto-augment ta_wide --random-erase 0.1 --use-v2 (where
            torchvision has transforms.v2)
each on an unchanged torchvision ImageFolder: torch.utils.data.DataLoader
against ringloader.DataLoader given the same dataset object. The path column
says whether ringloader ran it natively or in Python workers (then it prints
why, once, on stderr). Each loader is warmed up by one epoch; every round
times one epoch of each loader in turn; medians of the rounds.

    PYTHONPATH=build/python /usr/bin/python3 bench/recipes.py --corpus DIR [--rounds 3]

timm rows (--timm, in a Python with timm): timm.data.create_loader as
train.py builds it (interpolation 'random', re_prob 0.25, re_mode 'pixel'),
training configs rand-m9-n2-inc1 and rand-m9-mstd0.5-inc1, with and without
its prefetcher (on the CPU: device='cpu'), over timm's own ImageDataset,
each loader iterated alone: create_loader on torch's DataLoader against
create_loader on ringloader.DataLoader (put in torch.utils.data's place, as
`python -m ringloader` does). With mstd, timm's posterize can be asked for 0
bits, which Pillow 13 refuses (ValueError in a worker): for torch's side the
bench gives timm's posterize Pillow 12's answer (a black image), which is
what the native op does.

    PYTHON=/root/.cache/ringloader/venv-clients-py312/bin/python
    $PYTHON bench/recipes.py --corpus DIR --timm [--rows timm-ra-n2,timm-ra-mstd-prefetch]

--dali (in a Python with nvidia-dali, e.g. a venv like bench/peers/setup.sh
makes): DALI's own CPU auto-augment for ta_wide, ra and imagenet in the same
rounds (bench/recipes_dali.py says what its pipeline is); ratios
ringloader/DALI and DALI/torch.

--profile N: no loaders; one thread's CPU time per image over N photos, each
row's torchvision transform (with PIL's decode) against ringloader's
converted pipeline on the same bytes: what bounds a row's ratio (with
--timm, timm's rows; a prefetcher row's pipeline ends at PILToTensor, its
normalization and erasing run in the trainer and are not in it).
ringloader-pipeline-bench (bench/pipeline_stage_bench.cc) splits one
pipeline's time by op as a worker runs it.

Every run prints the 1-minute load average before and after each round,
and each side's CPU time per image (this process and its workers, medians
of the rounds): on a machine shared with other jobs the img/s ratio moves
with their load, the CPU ratio much less (with every core busy, img/s is
cores / CPU per image).
Make the corpus with bench/make_photo_folder.py DIR --preset imagenet
--per-class 300 (3,000 photos, as the issue measured).
"""
import argparse
import json
import os
import statistics
import sys
import time

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def preset(auto_augment, random_erase=0.0, use_v2=False, crop_size=224):
    """ClassificationPresetTrain (backend "pil"), as the references write it."""
    import torch
    if use_v2:
        import torchvision.transforms.v2 as T
    else:
        import torchvision.transforms as T
    bilinear = T.InterpolationMode.BILINEAR
    ops = [T.RandomResizedCrop(crop_size, interpolation=bilinear, antialias=True),
           T.RandomHorizontalFlip(0.5)]
    if auto_augment == "ra":
        ops.append(T.RandAugment(interpolation=bilinear, magnitude=9))
    elif auto_augment == "ta_wide":
        ops.append(T.TrivialAugmentWide(interpolation=bilinear))
    else:
        ops.append(T.AutoAugment(policy=T.AutoAugmentPolicy(auto_augment),
                                 interpolation=bilinear))
    ops.append(T.PILToTensor())
    ops += [T.ToDtype(torch.float, scale=True) if use_v2 else T.ConvertImageDtype(torch.float),
            T.Normalize(mean=MEAN, std=STD)]
    if random_erase > 0:
        ops.append(T.RandomErasing(p=random_erase))
    if use_v2:
        ops.append(T.ToPureTensor())
    return ClassificationPresetTrain(T.Compose(ops))


class ClassificationPresetTrain:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        return self.transforms(img)


def rows():
    out = {"ta_wide": preset("ta_wide", 0.1), "ra": preset("ra"),
           "imagenet": preset("imagenet")}
    try:
        import torchvision.transforms.v2  # noqa: F401
        out["use_v2"] = preset("ta_wide", 0.1, use_v2=True)
    except ImportError:
        print("torchvision has no transforms.v2: no use_v2 row", file=sys.stderr)
    return out


TIMM_CONFIGS = {"timm-ra-n2": "rand-m9-n2-inc1", "timm-ra-mstd": "rand-m9-mstd0.5-inc1"}


def pillow12_posterize():
    """timm's posterize with Pillow 12's answer for 0 bits (see the doc)."""
    from PIL import Image
    from timm.data import auto_augment as taa
    original = taa.posterize

    def posterize(img, bits_to_keep, **kwargs):
        if bits_to_keep <= 0:
            return Image.new(img.mode, img.size)
        return original(img, bits_to_keep, **kwargs)
    for name in ("Posterize", "PosterizeIncreasing", "PosterizeOriginal"):
        taa.NAME_TO_OP[name] = posterize


def timm_loader(corpus, config, prefetcher, loader_class, args):
    """create_loader as timm's train.py calls it, on `loader_class`."""
    import torch
    import timm.data
    dataset = timm.data.create_dataset("", root=corpus, split="train", is_training=True)
    saved, torch.utils.data.DataLoader = torch.utils.data.DataLoader, loader_class
    try:
        return timm.data.create_loader(
            dataset, input_size=(3, 224, 224), batch_size=args.batch_size, is_training=True,
            use_prefetcher=prefetcher, auto_augment=config, re_prob=0.25, re_mode="pixel",
            interpolation="random", num_workers=args.workers, device=torch.device("cpu"),
            persistent_workers=True)
    finally:
        torch.utils.data.DataLoader = saved


def timm_rows(corpus, args):
    import torch
    import ringloader
    pillow12_posterize()
    out = {}
    for name, config in TIMM_CONFIGS.items():
        for prefetcher in (False, True):
            row = name + ("-prefetch" if prefetcher else "")
            if args.rows and row not in args.rows.split(","):
                continue
            ours = timm_loader(corpus, config, prefetcher, ringloader.DataLoader, args)
            native = getattr(getattr(ours, "loader", ours), "_converted", None)
            out[row] = {"torch": timm_loader(corpus, config, prefetcher,
                                             torch.utils.data.DataLoader, args),
                        "ringloader": ours,
                        "path": "native" if native else "Python workers"}
    return out


def profile(loaders, corpus, count):
    """One thread, no loader: core-us per image of each row's sample work
    (the least of 3 alternating passes),
    torch's (torchvision's ImageFolder __getitem__: PIL decode + the
    transform) against ringloader's (the converted pipeline on the same
    file's bytes, decode included). The loaders' ratio cannot pass these
    ratios by much: it is what bounds a row."""
    import torchvision
    from ringloader import _ringloader
    samples = torchvision.datasets.ImageFolder(corpus).samples
    stride = max(1, len(samples) // count)  # every class, as the loaders see them
    blobs = [open(samples[i * stride][0], "rb").read() for i in range(count)]
    out = {}
    for name, sides in loaders.items():
        dataset = sides["torch"].dataset
        # timm's PrefetchLoader wraps the DataLoader (its .loader).
        converted = getattr(sides["ringloader"], "loader", sides["ringloader"])._converted
        if converted is None:
            continue
        pipeline = converted.ringloader_pipeline_json()
        # The same pipeline without its augment: what the augment costs.
        base = json.dumps([op for op in json.loads(pipeline) if op["op"] not in AUGMENTS])
        costs = {}
        for _ in range(3):  # sides alternate; the least of 3 passes each
            for side in ("torch", "ringloader", "base"):
                start = time.process_time()
                for i, blob in enumerate(blobs):
                    if side == "torch":
                        dataset[i * stride]
                    else:
                        _ringloader.apply_pipeline(pipeline if side == "ringloader" else base,
                                                   blob, "RGB", 0, 0, i)
                spent = (time.process_time() - start) / count * 1e6
                costs[side] = min(costs.get(side, spent), spent)
        out[name] = costs
        print(f"| {name} | {costs['torch']:.0f} | {costs['ringloader']:.0f} "
              f"| {costs['ringloader'] - costs['base']:.0f} "
              f"| {costs['torch'] / costs['ringloader']:.2f}x |", flush=True)
    return out


SIDES = ("torch", "ringloader", "dali")
AUGMENTS = ("TrivialAugmentWide", "RandAugment", "AutoAugment", "AugMix", "TimmRandAugment")


def add_dali(loaders, args):
    """DALI's own auto-augment beside the torchvision rows (recipes_dali.py);
    a recipe DALI cannot run on the CPU prints DALI's error and has no DALI
    column."""
    import recipes_dali
    for name in recipes_dali.RECIPES:
        if name not in loaders:
            continue
        try:
            loaders[name]["dali"] = recipes_dali.dali_loader(
                args.corpus, name, args.batch_size, args.workers)
        except Exception as error:  # noqa: BLE001 -- shown as DALI said it
            print(f"DALI cannot run {name} on the CPU: {type(error).__name__}: {error}",
                  file=sys.stderr)


def process_cpu_s():
    """CPU seconds of this process and every live descendant (the loaders'
    workers), plus reaped children: what an epoch cost, whatever else the
    machine ran meanwhile."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:  # it ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parent[int(pid)] = int(fields[1])
        cpu[int(pid)] = (int(fields[11]) + int(fields[12])) / tick
    mine, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        p = frontier.pop()
        children = [c for c, pp in parent.items() if pp == p and c not in mine]
        mine.update(children)
        frontier += children
    reaped = os.times()
    return sum(cpu[p] for p in mine if p != os.getpid()) + sum(reaped[:4])


def timed(loader, cpu_per_image=None):
    """Images per second over one epoch; appends the epoch's CPU us per image
    (trainer + workers) to `cpu_per_image` when given."""
    count, cpu, start = 0, process_cpu_s(), time.perf_counter()
    for images, _labels in loader:
        images[0].sum()  # touch the batch, as a trainer would
        count += images.shape[0]
    rate = count / (time.perf_counter() - start)
    if cpu_per_image is not None:
        cpu_per_image.append((process_cpu_s() - cpu) / count * 1e6)
    return rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="an ImageFolder root")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rows", default="", help="comma-separated subset of the rows")
    parser.add_argument("--timm", action="store_true", help="timm's create_loader rows only")
    parser.add_argument("--dali", action="store_true",
                        help="add DALI's own CPU auto-augment (ta_wide, ra, imagenet rows)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="instead of loaders: one thread's CPU us per image over N photos")
    args = parser.parse_args()
    import torch
    import torchvision
    import ringloader
    torch.set_num_threads(1)
    load_before = open("/proc/loadavg").read().split()[:3]
    common = dict(batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    loaders = timm_rows(args.corpus, args) if args.timm else {}
    for name, transform in ({} if args.timm else rows()).items():
        if args.rows and name not in args.rows.split(","):
            continue
        dataset = torchvision.datasets.ImageFolder(args.corpus, transform)
        ours = ringloader.DataLoader(dataset, **common)
        loaders[name] = {"torch": torch.utils.data.DataLoader(dataset, persistent_workers=True,
                                                              **common),
                         "ringloader": ours,
                         "path": "native" if ours._converted else "Python workers"}
    if args.profile:
        print("| recipe | torch core-us/img | ringloader core-us/img | of which the augment "
              "| ratio |\n|---|---|---|---|---|")
        profile(loaders, args.corpus, args.profile)
        return
    if args.dali:
        add_dali(loaders, args)
    for sides in loaders.values():
        for side in SIDES:
            if side in sides:
                timed(sides[side])
    rates = {name: {side: [] for side in SIDES if side in sides}
             for name, sides in loaders.items()}
    cpus = {name: {side: [] for side in sides_rates} for name, sides_rates in rates.items()}
    loads = []  # the 1-minute load average after each round
    for _ in range(args.rounds):
        for name, sides in loaders.items():
            for side in rates[name]:
                rates[name][side].append(timed(sides[side], cpus[name][side]))
        loads.append(float(open("/proc/loadavg").read().split()[0]))
    load_after = open("/proc/loadavg").read().split()[:3]
    results = []
    for name, sides in rates.items():
        median = {side: statistics.median(values) for side, values in sides.items()}
        ratios = {"ringloader/torch": median["ringloader"] / median["torch"],
                  # each round's own ratio (both sides under that round's
                  # load), their median: steadier than the medians' ratio
                  "per round": statistics.median(
                      r / t for r, t in zip(sides["ringloader"], sides["torch"]))}
        if "dali" in median:
            ratios["ringloader/dali"] = median["ringloader"] / median["dali"]
            ratios["dali/torch"] = median["dali"] / median["torch"]
        cpu = {side: statistics.median(values) for side, values in cpus[name].items()}
        ratios["cpu torch/ringloader"] = cpu["torch"] / cpu["ringloader"]
        results.append({"row": name, "path": loaders[name]["path"], "rounds": sides,
                        "img_per_s": median, "cpu_us_per_image": cpu, "ratios": ratios})
    first = loaders and next(iter(loaders.values()))["torch"]
    dali = sys.modules.get("nvidia.dali")
    print(json.dumps({"images": len(getattr(first, "loader", first).dataset),
                      "cores": os.cpu_count(), "load_before": load_before,
                      "load_after_rounds": loads, "load_after": load_after,
                      "torch": torch.__version__, "torchvision": torchvision.__version__,
                      "timm": getattr(sys.modules.get("timm"), "__version__", None),
                      "dali": getattr(dali, "__version__", None), "results": results}))
    print("| recipe | path | torch img/s | ringloader img/s | ratio | per round "
          "| CPU us/img torch | ringloader | CPU ratio |"
          + (" DALI img/s | ringloader/DALI | DALI/torch |" if args.dali else ""))
    print("|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if args.dali else ""))
    for r in results:
        m, q, c = r["img_per_s"], r["ratios"], r["cpu_us_per_image"]
        line = (f"| {r['row']} | {r['path']} | {m['torch']:.0f} | {m['ringloader']:.0f} "
                f"| {q['ringloader/torch']:.2f}x | {q['per round']:.2f}x "
                f"| {c['torch']:.0f} | {c['ringloader']:.0f} "
                f"| {q['cpu torch/ringloader']:.2f}x |")
        if "dali" in m:
            line += f" {m['dali']:.0f} | {q['ringloader/dali']:.2f}x | {q['dali/torch']:.2f}x |"
        elif args.dali:
            line += " - | - | - |"
        print(line)
    print(f"load average before {' '.join(load_before)}, after each round "
          f"{', '.join(f'{v:.2f}' for v in loads)} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
